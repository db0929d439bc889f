/*
 * sanitizers.h: which sanitizer this translation unit is compiled under.
 *
 * gcc says so with __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, clang with
 * __has_feature(address_sanitizer / thread_sanitizer); a user's own
 * -fsanitize=... in CMAKE_C_FLAGS is enough. One place asks, so that the
 * library (segments.c, tsan_shim.h) and the tests that measure memory agree.
 *
 *   TW_SAN_ADDRESS  defined to 1 under AddressSanitizer
 *   TW_SAN_THREAD   defined to 1 under ThreadSanitizer
 *   TW_SAN_ANY      defined to 1 under either (their allocators keep freed
 *                   blocks and shadow memory, so RSS is not the library's)
 *
 * Test them with #ifdef: they are not defined otherwise. No includes: the
 * TSan shim reads this before any system header.
 */
#ifndef TW_SANITIZERS_H
#define TW_SANITIZERS_H

#if defined(__SANITIZE_ADDRESS__)
#define TW_SAN_ADDRESS 1
#endif
#if defined(__SANITIZE_THREAD__)
#define TW_SAN_THREAD 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(TW_SAN_ADDRESS)
#define TW_SAN_ADDRESS 1
#endif
#if __has_feature(thread_sanitizer) && !defined(TW_SAN_THREAD)
#define TW_SAN_THREAD 1
#endif
#endif

#if defined(TW_SAN_ADDRESS) || defined(TW_SAN_THREAD)
#define TW_SAN_ANY 1
#endif

#endif /* TW_SANITIZERS_H */
