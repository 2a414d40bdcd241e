/* nn/optim_internal.h — internal to nn/: the optimizer's layout, shared by
 * the update rules (optim.c) and the state files (optim_state.c). */
#ifndef WEFT_NN_OPTIM_INTERNAL_H
#define WEFT_NN_OPTIM_INTERNAL_H

#include <weft/nn.h>

typedef enum optimizer_kind { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW } optimizer_kind;

/* The state of one parameter: SGD's momentum buffer, or Adam's exp_avg and
 * exp_avg_sq; all NULL until the parameter's first step. */
typedef struct param_state {
    weft_tensor *param;
    weft_tensor *first;  /* momentum_buffer / exp_avg */
    weft_tensor *second; /* exp_avg_sq */
    int64_t step;
    int group;
} param_state;

/* Parameters are kept in group order (group 0's, then group 1's ...), so
 * a parameter's index is also its index in a saved state file. */
struct weft_optimizer {
    optimizer_kind kind;
    weft_optim_group defaults; /* the constructor's values */
    int ngroups, capgroups;
    weft_optim_group *groups;
    int n, cap;
    param_state *state;
};

/* torch.optim's checks of one group's hyper-parameters (optim.c). */
int wn__optim_check_hyper(optimizer_kind kind, const weft_optim_group *h);

#endif
