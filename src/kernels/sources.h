/* Internal: the kernel sources of cl/, embedded at build time. */
#ifndef CLT_KERNELS_SOURCES_H
#define CLT_KERNELS_SOURCES_H

typedef struct clt__kernel_source {
    const char *name;   /* file stem: "elementwise" for cl/elementwise.cl */
    const char *source;
} clt__kernel_source;

extern const clt__kernel_source clt__kernel_sources[];
extern const int clt__kernel_source_count;

#endif
