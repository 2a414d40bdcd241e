/* dispatch/schema.c — parses operator schemas ("add(Tensor self, Tensor
 * other, *, Scalar alpha=1) -> Tensor") into the argument descriptions the
 * dispatcher checks boxed calls against.  The grammar is the one
 * dispatch/gen_ops.py reads at build time; plugins define operators with the
 * same text at run time. */
#include <ctype.h>
#include <string.h>

#include "dispatch/dispatcher.h"

static const struct {
    const char *text;
    wf_arg_type type;
} arg_types[] = {
    {"Tensor(a!)", WF_ARG_TENSOR_MUT}, {"Tensor[]", WF_ARG_TENSOR_LIST},
    {"Tensor?", WF_ARG_TENSOR_OPT},    {"Tensor", WF_ARG_TENSOR},
    {"Scalar", WF_ARG_SCALAR},         {"float", WF_ARG_FLOAT},
    {"int[]?", WF_ARG_INT_LIST_OPT},   {"int[]", WF_ARG_INT_LIST},
    {"int", WF_ARG_INT},               {"bool", WF_ARG_BOOL},
    {"ScalarType?", WF_ARG_DTYPE_OPT}, {"Generator?", WF_ARG_GENERATOR_OPT},
    {"Scalar?", WF_ARG_SCALAR_OPT},    {"float?", WF_ARG_FLOAT_OPT},
    {"int?", WF_ARG_INT_OPT},          {"str", WF_ARG_STRING},
    {"str?", WF_ARG_STRING_OPT},       {"Tensor?[]", WF_ARG_TENSOR_LIST_OPT},
    {"float[]", WF_ARG_FLOAT_LIST},    {"float[]?", WF_ARG_FLOAT_LIST_OPT},
};

static const char *skip_space(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

static int parse_arg(wf_arg *arg, const char *p, size_t len, const char *text)
{
    char buf[128];
    const char *start = skip_space(p);
    len -= (size_t)(start - p);
    p = start;
    while (len && isspace((unsigned char)p[len - 1]))
        len--;
    if (len == 0 || len >= sizeof buf)
        return wf__errorf(WEFT_EINVAL, "schema '%s': empty or overlong argument", text);
    memcpy(buf, p, len);
    buf[len] = '\0';
    char *space = strchr(buf, ' ');
    if (!space)
        return wf__errorf(WEFT_EINVAL, "schema '%s': argument '%s' lacks a type or name", text, buf);
    *space = '\0';
    int found = -1;
    for (size_t i = 0; i < sizeof arg_types / sizeof arg_types[0]; i++)
        if (strcmp(buf, arg_types[i].text) == 0)
            found = (int)i;
    if (found < 0)
        return wf__errorf(WEFT_EINVAL, "schema '%s': unknown type '%s'", text, buf);
    arg->type = (uint8_t)arg_types[found].type;
    char *name = (char *)skip_space(space + 1);
    char *eq = strchr(name, '=');
    if (eq) {
        *eq = '\0';
        if (strlen(eq + 1) >= sizeof arg->default_text)
            return wf__errorf(WEFT_EINVAL, "schema '%s': default too long", text);
        strcpy(arg->default_text, eq + 1);
        arg->has_default = true;
    }
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen >= sizeof arg->name)
        return wf__errorf(WEFT_EINVAL, "schema '%s': bad argument name", text);
    for (size_t i = 0; i < nlen; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_')
            return wf__errorf(WEFT_EINVAL, "schema '%s': bad argument name '%s'", text, name);
    strcpy(arg->name, name);
    return 0;
}

int wd__schema_parse(wf_schema *out, const char *text)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return wf__errorf(WEFT_EINVAL, "schema is NULL");
    const char *p = skip_space(text);
    const char *open = strchr(p, '(');
    const char *arrow = strstr(p, "->");
    if (!open || !arrow || arrow < open)
        return wf__errorf(WEFT_EINVAL, "schema '%s': expected NAME(ARGS) -> RESULTS", text);
    size_t nlen = (size_t)(open - p);
    while (nlen && isspace((unsigned char)p[nlen - 1]))
        nlen--;
    if (nlen == 0 || nlen >= sizeof out->name)
        return wf__errorf(WEFT_EINVAL, "schema '%s': bad operator name", text);
    for (size_t i = 0; i < nlen; i++)
        if (!isalnum((unsigned char)p[i]) && p[i] != '_')
            return wf__errorf(WEFT_EINVAL, "schema '%s': bad operator name", text);
    memcpy(out->name, p, nlen);
    /* the argument list ends at the last ')' before the arrow */
    const char *close = arrow;
    while (close > open && *close != ')')
        close--;
    if (close == open && *close != ')')
        return wf__errorf(WEFT_EINVAL, "schema '%s': unbalanced parentheses", text);
    bool kwonly = false;
    const char *a = open + 1;
    while (a < close) {
        const char *comma = memchr(a, ',', (size_t)(close - a));
        const char *end = comma ? comma : close;
        const char *s = skip_space(a);
        if (s < end && *s == '*' && skip_space(s + 1) >= end) {
            kwonly = true;
        } else if (skip_space(a) < end) {
            if (out->nargs == WF_MAX_ARGS)
                return wf__errorf(WEFT_EINVAL, "schema '%s': more than %d arguments", text,
                                  WF_MAX_ARGS);
            wf_arg *arg = &out->args[out->nargs++];
            int rc = parse_arg(arg, a, (size_t)(end - a), text);
            if (rc < 0)
                return rc;
            arg->kwonly = kwonly;
        }
        a = end + 1;
    }
    const char *r = skip_space(arrow + 2);
    if (strncmp(r, "()", 2) == 0) {
        out->nrets = 0;
    } else if (strncmp(r, "Tensor", 6) == 0 && *skip_space(r + 6) == '\0') {
        out->nrets = 1;
    } else if (strncmp(r, "Tensor[]", 8) == 0 && *skip_space(r + 8) == '\0') {
        /* one result slot holding a list (see weft_tensor_list_new) */
        out->nrets = 1;
        out->list_result = true;
    } else if (*r == '(') {
        if (strstr(r, "[]"))
            return wf__errorf(WEFT_EINVAL, "schema '%s': a Tensor[] result must be the only result",
                              text);
        for (const char *q = r; (q = strstr(q, "Tensor")) != NULL; q += 6)
            out->nrets++;
    }
    if (out->nrets == 0 && strncmp(r, "()", 2) != 0)
        return wf__errorf(WEFT_EINVAL, "schema '%s': bad results '%s'", text, r);
    out->mutating = out->nargs > 0 && out->args[0].type == WF_ARG_TENSOR_MUT;
    if (out->mutating != (out->nrets == 0))
        return wf__errorf(WEFT_EINVAL,
                          "schema '%s': an operator either writes its first argument or returns tensors",
                          text);
    return 0;
}
