/* tests/plugins/noentry.c — a shared library that is not a weft plugin:
 * it has no entry descriptor. */
int not_a_plugin(void);
__attribute__((visibility("default"))) int not_a_plugin(void)
{
    return 42;
}
