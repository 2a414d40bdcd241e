/* nn/lr_schedule.c — learning-rate schedules as pure functions of the
 * epoch, PyTorch's closed forms (StepLR, CosineAnnealingLR).  Apply one
 * with weft_optimizer_set_lr. */
#include <math.h>

#include <weft/nn.h>

double weft_lr_step(double base_lr, int64_t step_size, double gamma, int64_t epoch)
{
    if (step_size < 1 || epoch < 0)
        return NAN;
    return base_lr * pow(gamma, (double)(epoch / step_size));
}

double weft_lr_cosine(double base_lr, double eta_min, int64_t T_max, int64_t epoch)
{
    if (T_max < 1 || epoch < 0)
        return NAN;
    return eta_min + (base_lr - eta_min) * (1.0 + cos(M_PI * (double)epoch / (double)T_max)) / 2.0;
}
