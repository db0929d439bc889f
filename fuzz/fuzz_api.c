/* fuzz_api.c: libFuzzer entry point; the work is in fuzz_decode.c. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return tw_fuzz_run(data, size);
}
