/* Memory recording (clt_memory_record_*) and its picture: every sample's
 * categories sum to the allocator's counters, the peak over the samples is
 * clt_memory_max_allocated, the phases are the step's, and the SVG (from
 * the API and from `clt train --memory-plot`) is well-formed, also with
 * hostile phase labels, and names the peak's phase. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "xml_check.h"

static char out[1 << 16];
#define run(...) clt_test_shell(out, sizeof out, __VA_ARGS__)

static int64_t sum_categories(const clt_memory_sample *s)
{
    int64_t v = 0;
    for (int c = 0; c < CLT_MEM_CATEGORY_COUNT; c++) v += s->category[c];
    return v;
}

/* Two training steps of a small ResMLP recorded on cpu, with the trainer's
 * major phases marked by hand. */
static clt_memory_record *record_steps(clt_device dev, int ckpt)
{
    clt_model *m;
    ck_assert_ok(clt_model_create_resmlp(&m, dev, 64, 32, 4, 10, 1));
    ck_assert_ok(clt_model_set_recompute(m, ckpt));
    clt_optimizer *opt;
    ck_assert_ok(clt_optimizer_create_adam(&opt, m, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0));
    float *xs = clt_test_random_floats(48 * 64, 3);
    clt_tensor *x = clt_test_upload(dev, xs, 48, 64), *y = NULL;
    int64_t n = 48;
    ck_assert_ok(clt_zeros(&y, dev, CLT_INT32, 1, &n));
    ck_assert_ok(clt_memory_reset_peak(dev));
    ck_assert_ok(clt_memory_record_start(dev));
    ck_assert_status(clt_memory_record_start(dev), CLT_ERR_INVALID_ARGUMENT);
    for (int step = 1; step <= 2; step++) {
        clt_tensor *logits = NULL, *loss = NULL, *dlogits = NULL;
        char label[32];
        snprintf(label, sizeof label, "step %d forward", step);
        ck_assert_ok(clt_memory_record_mark(dev, label));
        ck_assert_ok(clt_model_forward(m, x, &logits));
        ck_assert_ok(clt_cross_entropy_loss_grad(&loss, &dlogits, logits, y));
        snprintf(label, sizeof label, "step %d backward", step);
        ck_assert_ok(clt_memory_record_mark(dev, label));
        ck_assert_ok(clt_model_zero_grad(m));
        ck_assert_ok(clt_model_backward(m, dlogits, NULL));
        snprintf(label, sizeof label, "step %d optimizer", step);
        ck_assert_ok(clt_memory_record_mark(dev, label));
        ck_assert_ok(clt_optimizer_step(opt));
        clt_tensor_release(logits);
        clt_tensor_release(loss);
        clt_tensor_release(dlogits);
    }
    clt_memory_record *r = NULL;
    ck_assert_ok(clt_memory_record_stop(dev, &r));
    ck_assert_ptr_nonnull(r);
    clt_memory_record *again = NULL;
    ck_assert_status(clt_memory_record_stop(dev, &again), CLT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(again);
    /* The last sample is the allocator's state now. */
    clt_memory_stats st;
    ck_assert_ok(clt_memory_get_stats(dev, &st));
    clt_memory_sample last;
    ck_assert_ok(clt_memory_record_sample(r, clt_memory_record_num_samples(r) - 1, &last));
    ck_assert_int_eq(last.allocated, st.allocated);
    ck_assert_int_eq(last.reserved, st.reserved);
    for (int c = 0; c < CLT_MEM_CATEGORY_COUNT; c++) ck_assert_int_eq(last.category[c], st.category_allocated[c]);
    /* The highest sample is the allocator's peak since the reset. */
    clt_memory_sample peak;
    ck_assert_ok(clt_memory_record_sample(r, clt_memory_record_peak(r), &peak));
    ck_assert_int_eq(peak.allocated, st.peak_allocated);
    ck_assert_int_eq(clt_memory_record_dropped(r), 0);
    clt_tensor_release(x);
    clt_tensor_release(y);
    free(xs);
    clt_optimizer_free(opt);
    clt_model_free(m);
    return r;
}

START_TEST(test_samples_sum_to_counters)
{
    clt_device dev = clt_test_cpu();
    clt_memory_record *r = record_steps(dev, 0);
    int64_t n = clt_memory_record_num_samples(r);
    ck_assert_msg(n > 20, "only %lld samples for two steps", (long long)n);
    int64_t max_reserved = 0;
    for (int64_t i = 0; i < n; i++) {
        clt_memory_sample s;
        ck_assert_ok(clt_memory_record_sample(r, i, &s));
        ck_assert_msg(sum_categories(&s) == s.allocated, "sample %lld: categories sum to %lld, allocated %lld",
                      (long long)i, (long long)sum_categories(&s), (long long)s.allocated);
        ck_assert_int_ge(s.reserved, s.allocated);
        ck_assert_int_ge(s.phase, (i == 0 ? -1 : 0));
        if (s.reserved > max_reserved) max_reserved = s.reserved;
    }
    ck_assert_int_le(max_reserved, clt_memory_max_reserved(dev));
    clt_memory_sample s;
    ck_assert_status(clt_memory_record_sample(r, n, &s), CLT_ERR_INVALID_ARGUMENT);
    /* The model marked its layers under the trainer's phases. */
    int fwd = 0, bwd = 0;
    for (int i = 0; i < clt_memory_record_num_phases(r); i++) {
        const char *p = clt_memory_record_phase(r, i);
        fwd += strcmp(p, "step 2 forward: forward net.3") == 0;
        bwd += strcmp(p, "step 2 backward: backward net.3") == 0;
    }
    ck_assert_int_eq(fwd, 1);
    ck_assert_int_eq(bwd, 1);
    /* The peak of a training step is in the step, not before it. */
    ck_assert_ok(clt_memory_record_sample(r, clt_memory_record_peak(r), &s));
    ck_assert_ptr_nonnull(strstr(clt_memory_record_phase(r, s.phase), "step "));
    clt_memory_record_free(r);
}
END_TEST

START_TEST(test_checkpointing_marks_recompute)
{
    clt_memory_record *r = record_steps(clt_test_cpu(), 2);
    int recompute = 0;
    for (int i = 0; i < clt_memory_record_num_phases(r); i++)
        recompute += strcmp(clt_memory_record_phase(r, i), "step 1 backward: recompute net.3-net.4") == 0;
    ck_assert_int_eq(recompute, 1);
    clt_memory_record_free(r);
}
END_TEST

/* Draws r into dir/m.svg (its path in path) and returns the file's text,
 * checked to be well-formed XML. */
static char *write_svg(const clt_memory_record *r, const char *dir, char *path, size_t len)
{
    snprintf(path, len, "%s/m.svg", dir);
    ck_assert_ok(clt_memory_record_write_svg(r, path));
    char *svg = clt_test_read_file(path);
    const char *bad = xml_problem(svg);
    ck_assert_msg(bad == NULL, "%s is not well-formed: %s", path, bad);
    return svg;
}

START_TEST(test_svg_names_the_peak)
{
    char dir[64];
    clt_test_make_temp_dir(dir, sizeof dir, "record");
    clt_memory_record *r = record_steps(clt_test_cpu(), 0);
    char path[128];
    char *svg = write_svg(r, dir, path, sizeof path);
    clt_memory_sample s;
    ck_assert_ok(clt_memory_record_sample(r, clt_memory_record_peak(r), &s));
    char want[256];
    snprintf(want, sizeof want, "peak: %.1f MiB allocated at event %lld, in %s (", (double)s.allocated / 1048576.0,
             (long long)clt_memory_record_peak(r), clt_memory_record_phase(r, s.phase));
    ck_assert_msg(strstr(svg, want) != NULL, "the SVG does not say '%s'", want);
    for (int c = 0; c < CLT_MEM_CATEGORY_COUNT; c++)
        ck_assert_msg(strstr(svg, clt_memory_category_name((clt_memory_category)c)), "no legend for %s",
                      clt_memory_category_name(c));
    ck_assert_ptr_nonnull(strstr(svg, ">reserved<"));
    ck_assert_ptr_null(strstr(svg, "memory cap")); /* no cap: no cap line */
    free(svg);
    char link[160];
    snprintf(link, sizeof link, "%s/link.svg", dir);
    ck_assert_int_eq(symlink(path, link), 0);
    ck_assert_status(clt_memory_record_write_svg(r, link), CLT_ERR_IO); /* a link is refused */
    unlink(link);
    snprintf(path, sizeof path, "%s/none/m.svg", dir);
    ck_assert_status(clt_memory_record_write_svg(r, path), CLT_ERR_IO);
    clt_memory_record_free(r);
    ck_assert_status(clt_memory_record_write_svg(NULL, path), CLT_ERR_INVALID_ARGUMENT);
    clt_test_remove_dir(dir);
}
END_TEST

/* Phase labels are the caller's: hostile bytes in one (control characters,
 * all five specials, ill-formed UTF-8, U+FFFE) and one whose 127 bytes kept
 * cut a character in half come out of clt_xml_escape as a well-formed SVG. */
START_TEST(test_svg_escapes_hostile_names)
{
    char dir[64];
    clt_test_make_temp_dir(dir, sizeof dir, "record-names");
    clt_device dev = clt_test_cpu();
    char cut[160], cut_drawn[160];
    memset(cut, 'c', 126);
    strcpy(cut + 126, "\xc3\xa9"); /* 'e' acute: its first byte is the 127th */
    memcpy(cut_drawn, cut, 126);
    strcpy(cut_drawn + 126, "\xef\xbf\xbd</text>");
    const char *hostile = "a\x01<b>&\"'\x1f\t\xc3\xa9\xff\xc0\xaf\xed\xa0\x80\xef\xbf\xbe!";
    const char *drawn = "a\xef\xbf\xbd&lt;b&gt;&amp;&quot;&apos;\xef\xbf\xbd\t\xc3\xa9"
                        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd!";
    ck_assert_ok(clt_memory_record_start(dev));
    ck_assert_ok(clt_memory_record_mark(dev, cut));
    clt_tensor *small = NULL, *big = NULL;
    int64_t n_small = 16, n_big = 1 << 16;
    ck_assert_ok(clt_zeros(&small, dev, CLT_FLOAT32, 1, &n_small));
    ck_assert_ok(clt_memory_record_mark(dev, hostile));
    ck_assert_ok(clt_zeros(&big, dev, CLT_FLOAT32, 1, &n_big)); /* the peak, in the hostile phase */
    clt_tensor_release(big);
    clt_tensor_release(small);
    clt_memory_record *r;
    ck_assert_ok(clt_memory_record_stop(dev, &r));
    ck_assert_str_eq(clt_memory_record_phase(r, 1), hostile); /* kept as given */
    char path[128];
    char *svg = write_svg(r, dir, path, sizeof path);
    char want[256];
    snprintf(want, sizeof want, ">%s</text>", drawn); /* the band's label */
    ck_assert_msg(strstr(svg, want), "no label '%s' in:\n%s", want, svg);
    snprintf(want, sizeof want, " MiB allocated at event %lld, in %s (", (long long)clt_memory_record_peak(r), drawn);
    ck_assert_msg(strstr(svg, want), "the peak is not named '%s':\n%s", want, svg);
    ck_assert_msg(strstr(svg, cut_drawn), "no label '%s' in:\n%s", cut_drawn, svg);
    free(svg);
    clt_memory_record_free(r);
    clt_test_remove_dir(dir);
}
END_TEST

/* `clt train --memory-plot` under a cap: the picture has the cap line and
 * names the peak in a phase of step 1 or 2. */
START_TEST(test_train_memory_plot)
{
    char dir[64];
    clt_test_make_temp_dir(dir, sizeof dir, "record-cli");
    clt_test_write_idx_split(dir, "train", 256, 1, 0);
    clt_test_write_idx_split(dir, "t10k", 64, 2, 0);
    int rc = run("CLT_MEMORY_CAP=64M %s train --data %s --steps 4 --batch-size 64 --hiddens 32 --blocks 2 --optimizer adam "
                 "--memory-plot %s/m.svg", clt_test_clt_path(), dir, dir);
    ck_assert_msg(rc == 0, "clt train --memory-plot failed (%d): %s", rc, out);
    char path[128];
    snprintf(path, sizeof path, "%s/m.svg", dir);
    char *svg = clt_test_read_file(path);
    const char *bad = xml_problem(svg);
    ck_assert_msg(bad == NULL, "not well-formed: %s", bad);
    ck_assert_ptr_nonnull(strstr(svg, "cap 64.0 MiB"));
    const char *peak = strstr(svg, "MiB allocated at event ");
    ck_assert_ptr_nonnull(peak);
    ck_assert_msg(strstr(peak, ", in step 1 ") == strchr(peak, ',') || strstr(peak, ", in step 2 ") == strchr(peak, ','),
                  "the peak is not named in step 1 or 2: %.200s", peak);
    ck_assert_ptr_nonnull(strstr(svg, ">step 1 optimizer<")); /* makes the gradients' state: a band */
    ck_assert_ptr_nonnull(strstr(svg, ">step 2 backward<"));
    ck_assert_ptr_null(strstr(svg, "step 3"));
    free(svg);
    clt_test_remove_dir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("record");
    TCase *tc = clt_test_tcase("record");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_samples_sum_to_counters);
    tcase_add_test(tc, test_checkpointing_marks_recompute);
    tcase_add_test(tc, test_svg_names_the_peak);
    tcase_add_test(tc, test_svg_escapes_hostile_names);
    tcase_add_test(tc, test_train_memory_plot);
    suite_add_tcase(s, tc);
    return clt_test_run(s);
}
