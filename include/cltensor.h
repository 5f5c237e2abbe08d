/* cltensor: train neural networks on any OpenCL device.
 * One include gives the whole public API.
 *
 * Threads: separate tensors, models, optimizers and loaders may be used from
 * separate threads at once, on one device or several (allocators, kernel
 * caches and queues lock per device; the error message is per thread). One
 * object used from two threads at once is not safe. The trainer's stop
 * request (clt_trainer_request_stop) is async-signal-safe.
 *
 * Ownership: every object has one owner and one release path: tensors are
 * reference counted (clt_tensor_release); every other object has a _free
 * that accepts NULL. Functions that create an object through an
 * out-pointer hand the caller what they wrote, and write NULL on failure;
 * getters of borrowed pointers (clt_model_named_parameter,
 * clt_optimizer_state, clt_safetensors_metadata_entry) leave their outputs as
 * they were when they fail. */
#ifndef CLTENSOR_H
#define CLTENSOR_H

#include "cltensor/version.h"
#include "cltensor/status.h"
#include "cltensor/half.h"
#include "cltensor/file.h"
#include "cltensor/device.h"
#include "cltensor/memory.h"
#include "cltensor/smi.h"
#include "cltensor/tensor.h"
#include "cltensor/ops.h"
#include "cltensor/async.h"
#include "cltensor/nn.h"
#include "cltensor/optim.h"
#include "cltensor/io.h"
#include "cltensor/data.h"
#include "cltensor/trainer.h"
#include "cltensor/warmup.h"
#include "cltensor/plan.h"
#include "cltensor/parallel.h"

#endif
