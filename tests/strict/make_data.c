/* strict_make_data DIR [N]: writes a Fashion-MNIST-shaped dataset (N
 * training images, default 256, and N / 4 test images, each a noisy picture
 * with a bright band where its label says) into DIR, for the trainings
 * under strict submission, scripts/oclgrind, and scripts/gpu-check's
 * capstone when the real data is absent. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <cltensor.h>

static int write_split(const char *dir, const char *prefix, int64_t n, uint64_t seed)
{
    uint8_t *images = malloc((size_t)n * 784), *labels = malloc((size_t)n);
    if (!images || !labels) {
        free(images);
        free(labels);
        return 1;
    }
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        int label = (int)((i * 7 + (int64_t)seed) % 10);
        labels[i] = (uint8_t)label;
        for (int p = 0; p < 784; p++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            images[i * 784 + p] = p >= label * 70 && p < label * 70 + 70 ? 230 : (uint8_t)(x % 60);
        }
    }
    char path[1024];
    int64_t idims[] = {n, 28, 28}, ldims[] = {n};
    int bad = 0;
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
    if (clt_idx_write(path, 3, idims, images, 0) != CLT_OK) bad = 1;
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    if (!bad && clt_idx_write(path, 1, ldims, labels, 0) != CLT_OK) bad = 1;
    if (bad) fprintf(stderr, "strict_make_data: %s\n", clt_last_error());
    free(images);
    free(labels);
    return bad;
}

int main(int argc, char **argv)
{
    long n = argc == 3 ? strtol(argv[2], NULL, 10) : 256;
    if (argc < 2 || argc > 3 || n < 4 || n > 1000000) {
        fprintf(stderr, "usage: strict_make_data DIR [N, 4 to 1000000]\n");
        return 2;
    }
    struct stat st;
    if (mkdir(argv[1], 0755) != 0 && (stat(argv[1], &st) != 0 || !S_ISDIR(st.st_mode))) {
        perror(argv[1]);
        return 1;
    }
    return write_split(argv[1], "train", n, 1) || write_split(argv[1], "t10k", n / 4, 2);
}
