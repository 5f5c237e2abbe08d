/* Internal: CLBlast kernel parameters per device from the tuner files that
 * CLT_CLBLAST_PARAMS names. */
#ifndef CLT_OPS_CLBLAST_PARAMS_H
#define CLT_OPS_CLBLAST_PARAMS_H

#include "../core/error.h"

/* Hands the parameters of every CLT_CLBLAST_PARAMS file made for the slot's
 * device to CLBlast. Runs once per device, before its first CLBlast call;
 * later calls return the first one's status (and message) again, so a bad
 * file fails every CLBlast product on that device. Thread-safe. */
clt_status clt__clblast_params_apply(int slot);

/* Reads and checks one tuner file as clt__clblast_params_apply would for a
 * device named devname, without handing anything to CLBlast: CLT_OK, or
 * the status and message that file would give (the fuzz target's entry). */
clt_status clt__clblast_params_check(const char *path, const char *devname);

#endif
