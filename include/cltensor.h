/* cltensor: train neural networks on any OpenCL device.
 * One include gives the whole public API. */
#ifndef CLTENSOR_H
#define CLTENSOR_H

#include "cltensor/status.h"
#include "cltensor/device.h"
#include "cltensor/memory.h"
#include "cltensor/tensor.h"
#include "cltensor/ops.h"
#include "cltensor/async.h"
#include "cltensor/nn.h"
#include "cltensor/optim.h"
#include "cltensor/io.h"
#include "cltensor/data.h"
#include "cltensor/trainer.h"
#include "cltensor/plan.h"
#include "cltensor/parallel.h"

#endif
