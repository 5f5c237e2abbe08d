/* The CPU GEMM's float16 kernels (gemm_nn_f16, gemm_tn_f16, gemm_np_f16,
 * gemm_tp_f16 and pack_bt_f16): cl/gemm_cpu.cl with GEMM_F16 defined, a
 * program of its own so that a float32 model builds none of them. The
 * library embeds the included file in place of the #include line
 * (cmake/embed_kernels.cmake), so the driver is given one source. */
#define GEMM_F16
#include "gemm_cpu.cl"
