/* test_fuzz_regressions.c: replay every file of fuzz/regressions/ and
 * fuzz/corpus/ through the fuzzer's decoder (fuzz/fuzz_decode.c), whose
 * oracle aborts on a violation. TW_FUZZ_DIRS: colon-separated directories,
 * set by tests/CMakeLists.txt. */
#include "tw_test.h"

#include <dirent.h>

#include "fuzz_decode.h"

#ifndef TW_FUZZ_DIRS
#error "TW_FUZZ_DIRS must name the directories to replay"
#endif

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        fail_msg("cannot open %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue; /* ., .., .gitkeep */
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (f == NULL)
            continue; /* a directory or unreadable: skip */
        static uint8_t buf[1 << 20];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        print_message("replay %s (%zu bytes)\n", path, len);
        fflush(stdout);
        tw_fuzz_run(buf, len);
        n++;
    }
    closedir(d);
    return n;
}

static void replay_all(void **state)
{
    (void)state;
    char dirs[] = TW_FUZZ_DIRS;
    int total = 0;
    for (char *save = NULL, *dir = strtok_r(dirs, ":", &save); dir != NULL;
         dir = strtok_r(NULL, ":", &save))
        total += replay_dir(dir);
    assert_true(total > 0);
}

static void empty_and_tiny_inputs(void **state)
{
    (void)state;
    uint8_t b[4] = {0, 0, 0, 0};
    tw_fuzz_run(NULL, 0);
    for (unsigned i = 0; i < 256; i++) {
        b[0] = (uint8_t)i;
        tw_fuzz_run(b, 1);
        b[1] = (uint8_t)(i * 7);
        b[2] = (uint8_t)(i * 13);
        tw_fuzz_run(b, sizeof b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_and_tiny_inputs),
        cmocka_unit_test(replay_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
