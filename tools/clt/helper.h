/* The warm-up helper of a cold `clt train --helper`: a second process that compiles
 * the training step's kernels from the last one back while the run
 * compiles them from the first, both filling pocl's cache. */
#ifndef CLT_TOOL_HELPER_H
#define CLT_TOOL_HELPER_H

#include <sys/types.h>

#include <cltensor.h>

/* Starts `clt warmup --helper` (this executable, /proc/self/exe) for the
 * ResMLP of 784 inputs, `hiddens`, `blocks` and 10 outputs on device, in
 * batches of `batch`, when no warm-up of that model is recorded in
 * cltensor's cache (clt_model_warmup_cached); its output goes to
 * /dev/null. Returns its process id, or 0 when none was started (a warm
 * cache, or spawning failed: the run compiles everything itself). */
pid_t clt_helper_start(clt_device device, int64_t hiddens, int64_t blocks, int64_t batch,
                       clt_optimizer_kind optimizer);
/* Ends the helper (SIGKILL) and waits for it; nothing for 0. Whatever it
 * did is only files in pocl's cache, written by rename: a run that ends
 * it at any point finds whole entries or none. */
void clt_helper_stop(pid_t pid);

#endif
