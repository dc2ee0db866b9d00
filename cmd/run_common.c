#include "cmd/run_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/registry.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/log.h"

int dt_run_load_data(const struct dt_config *cfg, struct dt_data *data)
{
    int rc = dt_data_load(data, cfg->data.format, cfg->data.dir, cfg->data.classes,
                          cfg->data.coarse_labels);
    if (rc)
        return rc;
    const struct dt_reg_dataset *reg = dt_registry_find(cfg->data.dataset);
    if (reg && reg->class_names && !data->train.names && reg->classes == data->train.classes) {
        /* Names shared with the registry's static table; dt_dataset_free frees only what the
         * readers allocated, so copy them. */
        struct dt_dataset *splits[2] = {&data->train, &data->test};
        for (int s = 0; s < 2; s++) {
            char **names = calloc((size_t)reg->classes, sizeof *names);
            if (!names)
                return dt_fail(DT_ERUNTIME, "out of memory");
            for (int i = 0; i < reg->classes; i++)
                names[i] = strdup(reg->class_names[i]);
            splits[s]->names = names;
        }
    }
    return 0;
}

int dt_run_ranks(const struct dt_config *cfg, bool verbose,
                 int (*rank_main)(struct dt_comm *comm, void *arg), void *arg)
{
    (void)verbose;
    if (cfg->dist.instances > 1)
        return dt_fail(DT_EUSAGE, "more than one instance is not built yet in this version");
    dt_nn_set_threads(cfg->dist.threads);
    struct dt_comm *comm = dt_comm_single();
    if (!comm)
        return dt_fail(DT_ERUNTIME, "out of memory");
    int rc = rank_main(comm, arg);
    comm->close(comm);
    return rc;
}
