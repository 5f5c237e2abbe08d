/* Internal: what the data files share about a dataset's arrays. */
#ifndef CLT_DATA_DATASET_H
#define CLT_DATA_DATASET_H

#include "cltensor/data.h"

/* n names copied (NULL for none or out of memory); freeing n of them. */
char **clt__names_copy(const char *const *names, int n);
void clt__names_free(char **names, int n);

/* Example i's class id (from classes or labels; -1 without either). */
int32_t clt__dataset_class(const clt_dataset *ds, int64_t i);

/* Feature j of example i as the loader gives it (bytes scaled by 1/255). */
float clt__dataset_feature(const clt_dataset *ds, int64_t i, int64_t j);

#endif
