/* Datasets from CSV, .npy, .npz, IDX of every type and host arrays; bad
 * data refused with file, line and column; splits, standardisation and the
 * loader on float features and regression targets. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "support.h"

static char dir[256];

static void setup(void) { clt_test_make_temp_dir(dir, sizeof dir, "data"); }
static void teardown(void) { clt_test_remove_dir(dir); }

static const char *put(const char *name, const void *data, size_t n)
{
    static char path[4][512];
    static int which;
    char *p = path[which++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    unlink(p);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
    return p;
}

static const char *put_text(const char *name, const char *text) { return put(name, text, strlen(text)); }

static clt_status load(clt_dataset *ds, const char *path)
{
    clt_data_options o = clt_data_default_options();
    return clt_dataset_load(ds, path, &o);
}

/* The call failed with CLT_ERR_FORMAT and a message holding each of the parts. */
static void expect_format(clt_status s, const char *a, const char *b)
{
    ck_assert_msg(s == CLT_ERR_FORMAT, "status %s (%s)", clt_status_string(s), clt_last_error());
    ck_assert_msg(strstr(clt_last_error(), a), "message '%s' lacks '%s'", clt_last_error(), a);
    if (b) ck_assert_msg(strstr(clt_last_error(), b), "message '%s' lacks '%s'", clt_last_error(), b);
}

START_TEST(test_csv_header_quotes_crlf_bom_strings)
{
    const char *p = put_text("iris.csv", "\xEF\xBB\xBF"
                                         "a,\"b \"\"mm\"\"\",species\r\n"
                                         "1.5,2,\"set,osa\"\r\n"
                                         "\r\n"
                                         "3,-4e1,virginica\r\n"
                                         " 5 , 6 ,set,osa\r\n");
    clt_dataset ds;
    /* The last row has 4 fields: a ragged row, named with both lines. */
    expect_format(load(&ds, p), "line 5 has 4 fields, line 1 has 3", p);
    p = put_text("iris.csv", "\xEF\xBB\xBF"
                             "a,\"b \"\"mm\"\"\",species\r\n"
                             "1.5,2,\"set,osa\"\r\n"
                             "\r\n"
                             "3,-4e1,virginica\r\n"
                             " 5 , 6 ,\"set,osa\"\r\n");
    ck_assert_int_eq(load(&ds, p), CLT_OK);
    ck_assert_int_eq(ds.n, 3);
    ck_assert_int_eq(clt_dataset_width(&ds), 2);
    ck_assert_int_eq(ds.task, CLT_TASK_CLASSIFY);
    ck_assert_int_eq(ds.num_classes, 2);
    ck_assert_str_eq(ds.class_names[0], "set,osa");
    ck_assert_str_eq(ds.class_names[1], "virginica");
    ck_assert_int_eq(ds.classes[0], 0);
    ck_assert_int_eq(ds.classes[1], 1);
    ck_assert_int_eq(ds.classes[2], 0);
    ck_assert(ds.x[0] == 1.5f && ds.x[1] == 2 && ds.x[2] == 3 && ds.x[3] == -40 && ds.x[4] == 5 && ds.x[5] == 6);
    clt_dataset_free(&ds);
    /* The target by header name (with its quotes undone) and by index. */
    clt_data_options o = clt_data_default_options();
    o.target = "b \"mm\"";
    o.task = CLT_TASK_REGRESS;
    ck_assert_msg(clt_dataset_load(&ds, p, &o) == CLT_ERR_FORMAT && strstr(clt_last_error(), "line 2, column 3"),
                  "%s", clt_last_error());
    p = put_text("t.csv", "a,b,c\n1,2,3\n4,5,6\n7,8.5,9\n");
    o.target = "b";
    ck_assert_int_eq(clt_dataset_load(&ds, p, &o), CLT_OK);
    ck_assert_int_eq(ds.task, CLT_TASK_REGRESS);
    ck_assert_int_eq(ds.outputs, 1);
    ck_assert(ds.values[2] == 8.5f && ds.x[4] == 7 && ds.x[5] == 9);
    clt_dataset_free(&ds);
    o.target = "0";
    ck_assert_int_eq(clt_dataset_load(&ds, p, &o), CLT_OK);
    ck_assert(ds.values[1] == 4 && ds.x[0] == 2);
    clt_dataset_free(&ds);
    o.target = "nope";
    expect_format(clt_dataset_load(&ds, p, &o), "no target column 'nope'", "the header names 'a', 'b', 'c'");
}
END_TEST

START_TEST(test_csv_delimiters_and_no_header)
{
    const char *texts[] = {"1;2;0\n3;4;1\n5;6;2\n7;8;1\n9;9;0\n1;1;2\n", "1\t2\t0\n3\t4\t1\n5\t6\t2\n7\t8\t1\n9\t9\t0\n1\t1\t2\n",
                           "  1  2 0\n3 4   1\n5 6 2\n7 8 1\n9 9 0\n1 1 2\n"};
    for (int t = 0; t < 3; t++) {
        const char *p = put_text("d.csv", texts[t]);
        clt_dataset ds;
        ck_assert_msg(load(&ds, p) == CLT_OK, "%s", clt_last_error());
        ck_assert_int_eq(ds.n, 6);
        ck_assert_int_eq(clt_dataset_width(&ds), 2);
        ck_assert_int_eq(ds.task, CLT_TASK_CLASSIFY);
        ck_assert_int_eq(ds.num_classes, 3);
        ck_assert_int_eq(ds.classes[2], 2);
        ck_assert_str_eq(ds.class_names[2], "2");
        ck_assert(ds.x[2] == 3 && ds.x[3] == 4);
        clt_dataset_free(&ds);
    }
    /* Integer labels that are not 0..K-1 are mapped in order of value, their text kept. */
    const char *p = put_text("m.csv", "1,-1\n2,10\n3,-1\n4,2\n5,10\n6,2\n");
    clt_dataset ds;
    ck_assert_int_eq(load(&ds, p), CLT_OK);
    ck_assert_int_eq(ds.num_classes, 3);
    ck_assert_str_eq(ds.class_names[0], "-1");
    ck_assert_str_eq(ds.class_names[1], "2");
    ck_assert_str_eq(ds.class_names[2], "10");
    ck_assert_int_eq(ds.classes[1], 2);
    ck_assert_int_eq(ds.classes[3], 1);
    /* A test set takes the training set's ids by name; a class it lacks is an error. */
    clt_data_options o = clt_data_default_options();
    o.like = &ds;
    clt_dataset test;
    ck_assert_int_eq(clt_dataset_load(&test, put_text("t.csv", "1,10\n2,10\n"), &o), CLT_OK);
    ck_assert_int_eq(test.num_classes, 3);
    ck_assert_int_eq(test.classes[0], 2);
    clt_dataset_free(&test);
    expect_format(clt_dataset_load(&test, put_text("t.csv", "1,10\n2,7\n"), &o), "line 2, column 2",
                  "class '7' does not occur in the training data");
    expect_format(clt_dataset_load(&test, put_text("t.csv", "1,2,10\n"), &o), "2 features per example",
                  "the training data has 1");
    /* Another width is that, even where a label is one the training set lacks. */
    expect_format(clt_dataset_load(&test, put_text("t.csv", "1,2,7\n"), &o), "2 features per example",
                  "the training data has 1");
    clt_dataset_free(&ds);
    /* Many distinct float values: a regression. */
    ck_assert_int_eq(load(&ds, put_text("r.csv", "x,y\n1,0.5\n2,1.5\n3,2.25\n")), CLT_OK);
    ck_assert_int_eq(ds.task, CLT_TASK_REGRESS);
    clt_dataset_free(&ds);
}
END_TEST

START_TEST(test_csv_bad_data)
{
    clt_dataset ds;
    const char *p = put_text("e.csv", "");
    expect_format(load(&ds, p), "an empty file", p);
    expect_format(load(&ds, put_text("h.csv", "a,b,c\n")), "empty file", NULL);
    expect_format(load(&ds, put_text("b.csv", "\n\n  \n")), "empty file", NULL);
    p = put_text("n.csv", "a,b,y\n1,2,0\n3,abc,1\n");
    expect_format(load(&ds, p), "line 3, column 2 (b): 'abc' is not a number", p);
    /* A field's line break (in quotes) and control bytes are escaped: the message stays one line. */
    p = put_text("nl.csv", "a,\"b\nc\",y\n1,2,0\n\"3\n4\",\"x\ty\x01\",1\n");
    expect_format(load(&ds, p), "line 4, column 1 (a): '3\\n4' is not a number", NULL);
    ck_assert_msg(!strchr(clt_last_error(), '\n'), "%s", clt_last_error());
    p = put_text("nl2.csv", "a,\"b\nc\",y\n1,2,0\n3,\"x\ty\x01\",1\n");
    expect_format(load(&ds, p), "line 4, column 2 (b\\nc): 'x\\ty\\x01' is not a number", NULL);
    p = put_text("long.csv", "a,y\n1,0\n0123456789012345678901234567890123456789xyz,1\n");
    expect_format(load(&ds, p), "'0123456789012345678901234567890123456789...' is not a number", NULL);
    /* A decimal comma gets a hint; a field that is no number either way does not. */
    p = put_text("dc.csv", "a;b;y\n1,5;2;0\n3;4;1\n");
    expect_format(load(&ds, p), "line 2, column 1 (a): '1,5' is not a number (a decimal comma?", NULL);
    p = put_text("dc2.csv", "a;b;y\n1,x;2;0\n3;4;1\n");
    expect_format(load(&ds, p), "'1,x' is not a number", NULL);
    ck_assert_msg(!strstr(clt_last_error(), "decimal"), "%s", clt_last_error());
    p = put_text("dc3.csv", "a;b;y\n1;2;0,5\n3;4;1,25\n5;6;2,5\n");
    clt_data_options ro = clt_data_default_options();
    ro.task = CLT_TASK_REGRESS;
    expect_format(clt_dataset_load(&ds, p, &ro), "'0,5' is not a number (the target of a regression) (a decimal comma?",
                  NULL);
    /* A target name is quoted and escaped as the header's names are. */
    ro.target = "q\nz";
    expect_format(clt_dataset_load(&ds, put_text("t.csv", "a,b\n1,2\n"), &ro), "no target column 'q\\nz'",
                  "the header names 'a', 'b'");
    expect_format(load(&ds, put_text("nan.csv", "1,2,0\n3,nan,1\n")), "line 2, column 2", "not a finite");
    expect_format(load(&ds, put_text("inf.csv", "1,2,0\n3,1e999,1\n")), "line 2, column 2", "not a finite");
    expect_format(load(&ds, put_text("big.csv", "1,2,0\n3,1e39,1\n")), "line 2, column 2", "float32");
    expect_format(load(&ds, put_text("m.csv", "1,2,0\n3,,1\n")), "line 2, column 2", "an empty field");
    expect_format(load(&ds, put_text("q.csv", "1,\"2,0\n3,4,1\n")), "line 1", "not closed");
    expect_format(load(&ds, put_text("q2.csv", "1,\"2\"x,0\n")), "line 1", "after the closing quote");
    expect_format(load(&ds, put_text("one.csv", "7\n8\n")), "no feature columns", NULL);
    expect_format(load(&ds, put(" nul.csv", "1,2\0,3\n", 7)), "NUL", NULL);
    /* One class: loads, but is no training set. */
    ck_assert_int_eq(load(&ds, put_text("c.csv", "1,2,3\n4,5,3\n")), CLT_OK);
    expect_format(clt_dataset_check(&ds, "c.csv"), "c.csv", "every one of its 2 examples is of class 3");
    clt_dataset_free(&ds);
    ck_assert_int_eq(load(&ds, put_text("ok.csv", "1,2,3\n4,5,1\n")), CLT_OK);
    ck_assert_int_eq(clt_dataset_check(&ds, "ok.csv"), CLT_OK);
    clt_dataset_free(&ds);
    /* gzip-compressed CSV reads as plain. */
    char gz[512];
    snprintf(gz, sizeof gz, "%s/g.csv.gz", dir);
    gzFile g = gzopen(gz, "wb");
    gzputs(g, "1,2,0\n3,4,1\n");
    gzclose(g);
    ck_assert_int_eq(load(&ds, gz), CLT_OK);
    ck_assert_int_eq(ds.n, 2);
    clt_dataset_free(&ds);
    ck_assert_int_eq(load(&ds, "/nonexistent/x.csv"), CLT_ERR_IO);
    ck_assert_int_eq(load(&ds, dir), CLT_ERR_IO);
}
END_TEST

START_TEST(test_npy)
{
    uint8_t buf[1024], ybuf[512];
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t y[3] = {0, 1, 0};
    clt_data_options o = clt_data_default_options();
    o.labels_path = put("y.npy", ybuf, clt_test_npy(ybuf, 1, "<i8", 0, "(3,)", y, sizeof y));
    const char *xp = put("x.npy", buf, clt_test_npy(buf, 1, "<f4", 0, "(3, 2)", x, sizeof x));
    clt_dataset ds;
    ck_assert_msg(clt_dataset_load(&ds, xp, &o) == CLT_OK, "%s", clt_last_error());
    ck_assert_int_eq(ds.n, 3);
    ck_assert_int_eq(clt_dataset_width(&ds), 2);
    ck_assert_int_eq(ds.task, CLT_TASK_CLASSIFY);
    ck_assert_int_eq(ds.num_classes, 2);
    ck_assert(ds.x[3] == 4 && ds.classes[1] == 1);
    clt_dataset_free(&ds);
    /* Fortran order is transposed: column-major 1..6 of a (3, 2) is rows (1,4), (2,5), (3,6). */
    double xd[6] = {1, 2, 3, 4, 5, 6};
    xp = put("x.npy", buf, clt_test_npy(buf, 2, "<f8", 1, "(3, 2)", xd, sizeof xd));
    ck_assert_int_eq(clt_dataset_load(&ds, xp, &o), CLT_OK);
    ck_assert(ds.x[0] == 1 && ds.x[1] == 4 && ds.x[2] == 2 && ds.x[5] == 6);
    clt_dataset_free(&ds);
    /* Big-endian int16 features, version 3, bool labels. */
    uint8_t be[12] = {0, 1, 0, 2, 0xff, 0xfe, 0, 4, 0, 5, 1, 0};
    uint8_t yb[3] = {1, 0, 1};
    o.labels_path = put("y.npy", ybuf, clt_test_npy(ybuf, 3, "|b1", 0, "(3,)", yb, sizeof yb));
    xp = put("x.npy", buf, clt_test_npy(buf, 3, ">i2", 0, "(3, 2)", be, sizeof be));
    ck_assert_msg(clt_dataset_load(&ds, xp, &o) == CLT_OK, "%s", clt_last_error());
    ck_assert(ds.x[0] == 1 && ds.x[1] == 2 && ds.x[2] == -2 && ds.x[5] == 256);
    ck_assert(ds.classes[0] == 1 && ds.classes[1] == 0);
    clt_dataset_free(&ds);
    /* uint8 images (n, 2, 2) stay bytes; float (n, 2) targets are a regression of 2 outputs. */
    uint8_t img[12] = {0, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    float yr[6] = {0.5f, 1, 2, 3, 4, 5};
    o.labels_path = put("y.npy", ybuf, clt_test_npy(ybuf, 1, "<f4", 0, "(3, 2)", yr, sizeof yr));
    xp = put("x.npy", buf, clt_test_npy(buf, 1, "|u1", 0, "(3, 2, 2)", img, sizeof img));
    ck_assert_int_eq(clt_dataset_load(&ds, xp, &o), CLT_OK);
    ck_assert_ptr_nonnull(ds.images);
    ck_assert(ds.rows == 2 && ds.cols == 2 && ds.images[1] == 255);
    ck_assert_int_eq(ds.task, CLT_TASK_REGRESS);
    ck_assert_int_eq(ds.outputs, 2);
    ck_assert(ds.values[0] == 0.5f);
    clt_dataset_free(&ds);
    /* Refused, clearly. */
    o.labels_path = NULL;
    xp = put("x.npy", buf, clt_test_npy(buf, 1, "<f4", 0, "(3, 2)", x, sizeof x));
    ck_assert_int_eq(clt_dataset_load(&ds, xp, &o), CLT_ERR_INVALID_ARGUMENT);
    o.labels_path = put("y.npy", ybuf, clt_test_npy(ybuf, 1, "<i8", 0, "(3,)", y, sizeof y));
    xp = put("x.npy", buf, clt_test_npy(buf, 1, "<f2", 0, "(3, 2)", x, 12));
    ck_assert_int_eq(clt_dataset_load(&ds, xp, &o), CLT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(clt_last_error(), "dtype '<f2'"), "%s", clt_last_error());
    xp = put("x.npy", buf, clt_test_npy(buf, 1, "<f4", 0, "(3, 2)", x, sizeof x - 4));
    expect_format(clt_dataset_load(&ds, xp, &o), "calls for 24 data bytes, the file holds 20", NULL);
    xp = put("x.npy", buf, clt_test_npy(buf, 1, "<f4", 0, "(2, 2)", x, 16));
    expect_format(clt_dataset_load(&ds, xp, &o), "targets of shape (3) for 2 examples", NULL);
    float bad[6] = {1, 2, 3, NAN, 5, 6};
    xp = put("x.npy", buf, clt_test_npy(buf, 1, "<f4", 0, "(3, 2)", bad, sizeof bad));
    expect_format(clt_dataset_load(&ds, xp, &o), "example 1, feature 1 is nan", NULL);
    buf[6] = 9;
    expect_format(clt_dataset_load(&ds, put("v.npy", buf, 200), &o), "version 9", NULL);
}
END_TEST

START_TEST(test_npz)
{
    uint8_t xb[512], yb[512], zb[4096];
    float x[6] = {1, 2, 3, 4, 5, 6};
    int32_t y[3] = {2, 0, 1};
    size_t xl = clt_test_npy(xb, 1, "<f4", 0, "(3, 2)", x, sizeof x);
    size_t yl = clt_test_npy(yb, 1, "<i4", 0, "(3,)", y, sizeof y);
    const char *names[] = {"features.npy", "y.npy", "x.npy"};
    const uint8_t *data[] = {xb, yb, xb};
    size_t lens[] = {xl, yl, xl};
    for (int deflated = 0; deflated < 2; deflated++) {
        const char *p = put("d.npz", zb, clt_test_zip(zb, 3, names, data, lens, deflated));
        clt_dataset ds;
        ck_assert_msg(load(&ds, p) == CLT_OK, "%s", clt_last_error());
        ck_assert(ds.n == 3 && clt_dataset_width(&ds) == 2 && ds.x[5] == 6 && ds.classes[0] == 2);
        ck_assert_int_eq(ds.num_classes, 3);
        clt_dataset_free(&ds);
        clt_data_options o = clt_data_default_options();
        o.x_name = "features";
        ck_assert_int_eq(clt_dataset_load(&ds, p, &o), CLT_OK);
        clt_dataset_free(&ds);
        o.y_name = "labels";
        expect_format(clt_dataset_load(&ds, p, &o), "no array 'labels'", "features, y, x");
    }
    /* A damaged deflate stream. */
    const char *p = put("d.npz", zb, clt_test_zip(zb, 3, names, data, lens, 1));
    size_t n = clt_test_zip(zb, 3, names, data, lens, 1);
    for (int i = 44; i < 60; i++) zb[i] ^= 0x5a; /* inside features.npy's deflate stream (from byte 42) */
    p = put("bad.npz", zb, n);
    clt_dataset ds;
    clt_data_options o = clt_data_default_options();
    o.x_name = "features";
    clt_status s = clt_dataset_load(&ds, p, &o);
    ck_assert_msg(s == CLT_ERR_FORMAT || s == CLT_ERR_UNSUPPORTED, "%s", clt_last_error());
}
END_TEST

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

START_TEST(test_idx_types)
{
    /* float32 examples (2, 3) and int32 labels (2): big-endian in the file, host order out. */
    uint8_t xf[4 + 8 + 24] = {0, 0, 0x0d, 2}, yf[4 + 4 + 8] = {0, 0, 0x0c, 1};
    be32(xf + 4, 2), be32(xf + 8, 3), be32(yf + 4, 2);
    float v[6] = {1.5f, -2, 3, 4, 5, 6.25f};
    for (int i = 0; i < 6; i++) {
        uint32_t b;
        memcpy(&b, &v[i], 4);
        be32(xf + 12 + 4 * i, b);
    }
    be32(yf + 8, 1), be32(yf + 12, 0);
    char xp[512], yp[512];
    snprintf(xp, sizeof xp, "%s", put("x.idx", xf, sizeof xf));
    snprintf(yp, sizeof yp, "%s", put("y.idx", yf, sizeof yf));
    clt_idx idx;
    ck_assert_int_eq(clt_idx_read(xp, &idx), CLT_OK);
    ck_assert_int_eq(idx.type, CLT_IDX_FLOAT);
    ck_assert_int_eq(idx.elem_size, 4);
    ck_assert_uint_eq(idx.nbytes, 24);
    ck_assert(clt_idx_value(&idx, 1) == -2 && clt_idx_value(&idx, 5) == 6.25);
    clt_idx_free(&idx);
    clt_dataset ds;
    clt_data_options o = clt_data_default_options();
    o.labels_path = yp;
    ck_assert_msg(clt_dataset_load(&ds, xp, &o) == CLT_OK, "%s", clt_last_error());
    ck_assert(ds.n == 2 && clt_dataset_width(&ds) == 3 && ds.x[0] == 1.5f && ds.x[5] == 6.25f);
    ck_assert(ds.task == CLT_TASK_CLASSIFY && ds.classes[0] == 1 && ds.num_classes == 2);
    clt_dataset_free(&ds);
    ck_assert_int_eq(clt_dataset_load_idx(&ds, xp, yp), CLT_OK);
    clt_dataset_free(&ds);
    /* Every element type, 4 dimensions. */
    const int types[] = {0x08, 0x09, 0x0b, 0x0c, 0x0d, 0x0e}, sizes[] = {1, 1, 2, 4, 4, 8};
    for (int t = 0; t < 6; t++) {
        uint8_t f[4 + 16 + 8 * 8] = {0, 0, (uint8_t)types[t], 4};
        be32(f + 4, 2), be32(f + 8, 2), be32(f + 12, 1), be32(f + 16, 2);
        for (int i = 0; i < 8; i++) f[20 + i * sizes[t] + sizes[t] - 1] = (uint8_t)(i + 1);
        const char *p = put("t.idx", f, 20 + 8 * (size_t)sizes[t]);
        ck_assert_msg(clt_idx_read(p, &idx) == CLT_OK, "type 0x%02x: %s", types[t], clt_last_error());
        ck_assert_int_eq(idx.ndim, 4);
        ck_assert_int_eq(idx.elem_size, sizes[t]);
        if (types[t] < 0x0d) ck_assert(clt_idx_value(&idx, 7) == 8);
        clt_idx_free(&idx);
    }
    /* A NaN feature is named. */
    be32(xf + 12 + 4, 0x7fc00000u);
    expect_format(clt_dataset_load(&ds, put("x.idx", xf, sizeof xf), &o), "example 0, feature 1 is nan", NULL);
    o.labels_path = NULL;
    ck_assert_int_eq(clt_dataset_load(&ds, xp, &o), CLT_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_from_host_split_standardize)
{
    enum { N = 40, W = 3 };
    float x[N * W];
    int32_t c[N];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < W; j++) x[i * W + j] = (float)(i * (j + 1));
        c[i] = i < 30 ? 0 : 1; /* 30 of class 0, 10 of class 1 */
    }
    clt_dataset ds;
    const char *names[] = {"no", "yes"};
    ck_assert_int_eq(clt_dataset_from_host(&ds, N, W, x, c, 0, names, NULL, 0), CLT_OK);
    ck_assert_int_eq(ds.num_classes, 2);
    ck_assert_str_eq(ds.class_names[1], "yes");
    ck_assert_int_eq(clt_dataset_check(&ds, "host"), CLT_OK);
    clt_dataset train, val;
    ck_assert_int_eq(clt_dataset_split(&train, &val, &ds, 0.2, 7), CLT_OK);
    ck_assert_int_eq(val.n, 8);
    ck_assert_int_eq(train.n, 32);
    int val1 = 0, seen[N] = {0};
    for (int i = 0; i < val.n; i++) {
        val1 += val.classes[i];
        seen[(int)val.x[i * W + 0]]++;
    }
    ck_assert_int_eq(val1, 2); /* stratified: 0.2 of each class */
    for (int i = 0; i < train.n; i++) seen[(int)train.x[i * W + 0]]++;
    for (int i = 0; i < N; i++) ck_assert_int_eq(seen[i], 1); /* disjoint and covering */
    /* Seeded: the same seed gives the same split, another seed another. */
    clt_dataset t2, v2;
    ck_assert_int_eq(clt_dataset_split(&t2, &v2, &ds, 0.2, 7), CLT_OK);
    ck_assert(memcmp(v2.x, val.x, sizeof(float) * W * 8) == 0);
    clt_dataset_free(&t2);
    clt_dataset_free(&v2);
    ck_assert_int_eq(clt_dataset_split(&t2, &v2, &ds, 0.2, 8), CLT_OK);
    ck_assert(memcmp(v2.x, val.x, sizeof(float) * W * 8) != 0);
    clt_dataset_free(&t2);
    clt_dataset_free(&v2);
    ck_assert_int_eq(clt_dataset_split(&t2, &v2, &ds, 1.0, 8), CLT_ERR_INVALID_ARGUMENT);
    /* Standardised on the training split: mean 0, std 1 there. */
    clt_standardizer st;
    ck_assert_int_eq(clt_standardizer_fit(&st, &train), CLT_OK);
    ck_assert_int_eq(clt_standardizer_apply(&st, &train), CLT_OK);
    for (int j = 0; j < W; j++) {
        double m = 0, v = 0;
        for (int i = 0; i < train.n; i++) m += train.x[i * W + j];
        m /= (double)train.n;
        for (int i = 0; i < train.n; i++) v += (train.x[i * W + j] - m) * (train.x[i * W + j] - m);
        ck_assert_double_lt(fabs(m), 1e-5);
        ck_assert_double_lt(fabs(sqrt(v / (double)train.n) - 1), 1e-5);
    }
    float row[W] = {10, 20, 30};
    ck_assert_int_eq(clt_standardizer_apply_rows(&st, row, 1, W), CLT_OK);
    ck_assert(fabsf(row[0] * st.x_std[0] + st.x_mean[0] - 10) < 1e-4f);
    ck_assert_int_eq(clt_standardizer_apply_rows(&st, row, 1, W + 1), CLT_ERR_SHAPE);
    clt_standardizer_free(&st);
    clt_dataset_free(&train);
    clt_dataset_free(&val);
    clt_dataset_free(&ds);
    /* Regression targets: standardised and inverted back into their units. */
    float y[N];
    for (int i = 0; i < N; i++) y[i] = 100.0f + 3.0f * (float)i;
    ck_assert_int_eq(clt_dataset_from_host(&ds, N, W, x, NULL, 0, NULL, y, 1), CLT_OK);
    ck_assert_int_eq(ds.task, CLT_TASK_REGRESS);
    ck_assert_int_eq(clt_dataset_num_outputs(&ds), 1);
    ck_assert_int_eq(clt_dataset_split(&train, &val, &ds, 0.25, 1), CLT_OK);
    ck_assert_int_eq(val.n, 10);
    ck_assert_int_eq(clt_standardizer_fit(&st, &ds), CLT_OK);
    ck_assert_int_eq(st.outputs, 1);
    ck_assert_int_eq(clt_standardizer_apply(&st, &ds), CLT_OK);
    float back[2] = {ds.values[0], ds.values[5]};
    ck_assert_int_eq(clt_standardizer_invert_targets(&st, back, 2, 1), CLT_OK);
    ck_assert(fabsf(back[0] - 100) < 1e-3f && fabsf(back[1] - 115) < 1e-3f);
    clt_standardizer_free(&st);
    clt_dataset_free(&train);
    clt_dataset_free(&val);
    clt_dataset_free(&ds);
    /* Refused host data. */
    x[4] = NAN;
    ck_assert_int_eq(clt_dataset_from_host(&ds, N, W, x, c, 0, NULL, NULL, 0), CLT_ERR_FORMAT);
    ck_assert_msg(strstr(clt_last_error(), "feature 1 of example 1"), "%s", clt_last_error());
    x[4] = 0;
    c[3] = 5;
    ck_assert_int_eq(clt_dataset_from_host(&ds, N, W, x, c, 2, NULL, NULL, 0), CLT_ERR_FORMAT);
    ck_assert_msg(strstr(clt_last_error(), "example 3 has class 5, outside 0..1"), "%s", clt_last_error());
    ck_assert_int_eq(clt_dataset_from_host(&ds, N, W, x, c, 0, NULL, y, 1), CLT_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_loader_floats_and_values)
{
    enum { N = 5, W = 3, K = 2 };
    float x[N * W], y[N * K];
    for (int i = 0; i < N * W; i++) x[i] = (float)i * 0.5f - 3;
    for (int i = 0; i < N * K; i++) y[i] = (float)i + 0.25f;
    clt_dataset ds;
    ck_assert_int_eq(clt_dataset_from_host(&ds, N, W, x, NULL, 0, NULL, y, K), CLT_OK);
    clt_loader_options o = clt_loader_default_options();
    o.batch_size = 2;
    o.shuffle = 0;
    o.flatten = 1;
    clt_loader *l;
    ck_assert_int_eq(clt_loader_create(&l, &ds, clt_test_cpu(), &o), CLT_OK);
    int64_t seen = 0;
    clt_tensor *bx, *by;
    while (clt_loader_next(l, &bx, &by) == CLT_OK && bx) {
        int64_t b = clt_tensor_dim(bx, 0);
        ck_assert_int_eq(clt_tensor_ndim(by), 2);
        ck_assert_int_eq(clt_tensor_dim(by, 1), K);
        ck_assert_int_eq(clt_tensor_dim(bx, 1), W);
        ck_assert_int_eq(clt_tensor_dtype(by), CLT_FLOAT32);
        float hx[2 * W], hy[2 * K];
        ck_assert_int_eq(clt_to_host(bx, hx, sizeof(float) * (size_t)(b * W)), CLT_OK);
        ck_assert_int_eq(clt_to_host(by, hy, sizeof(float) * (size_t)(b * K)), CLT_OK);
        ck_assert(memcmp(hx, x + seen * W, sizeof(float) * (size_t)(b * W)) == 0);
        ck_assert(memcmp(hy, y + seen * K, sizeof(float) * (size_t)(b * K)) == 0);
        seen += b;
        clt_tensor_release(bx);
        clt_tensor_release(by);
    }
    ck_assert_int_eq(seen, N);
    clt_loader_free(l);
    clt_dataset_free(&ds);
    clt_test_assert_no_live_tensors();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data");
    TCase *tc = clt_test_tcase("readers");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_csv_header_quotes_crlf_bom_strings);
    tcase_add_test(tc, test_csv_delimiters_and_no_header);
    tcase_add_test(tc, test_csv_bad_data);
    tcase_add_test(tc, test_npy);
    tcase_add_test(tc, test_npz);
    tcase_add_test(tc, test_idx_types);
    tcase_add_test(tc, test_from_host_split_standardize);
    tcase_add_test(tc, test_loader_floats_and_values);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
