/*
 * tsan_shim.h: make liburcu's inline code visible to ThreadSanitizer.
 *
 * The build force-includes this header (-include) ahead of everything else
 * in every translation unit of the library (CMakeLists.txt). Outside a
 * ThreadSanitizer build it is empty. Inside one (sanitizers.h asks the
 * compiler; a user's own -fsanitize=thread in CMAKE_C_FLAGS is enough) it:
 *
 *   - defines TW_TSAN to 1, for annotations in our code
 *     (test it with #ifdef TW_TSAN: it is not defined otherwise);
 *   - redefines the shared-memory accessors and atomics of liburcu 0.13 on
 *     top of __atomic builtins, so that the queue code we inline from its
 *     headers (urcu/static/wfcqueue.h, compiled with -D_LGPL_SOURCE) is
 *     instrumented with the orders TSan understands.
 *
 * Why: liburcu 0.13 on x86-64 implements uatomic_xchg/cmpxchg/add... as
 * inline assembly and uatomic_read/set, CMM_LOAD_SHARED/CMM_STORE_SHARED as
 * plain volatile accesses, with ordering from stand-alone fences. TSan sees
 * neither assembly nor fences, so every hand-off through a wfcqueue would be
 * reported as a race (notes/DEPENDENCIES.md). There is no switch to compiler
 * atomics in this liburcu version.
 *
 * Mapping (stronger than or equal to what liburcu promises on x86):
 *   loads   (CMM_LOAD_SHARED, _CMM_LOAD_SHARED, uatomic_read)  acquire
 *   stores  (CMM_STORE_SHARED, _CMM_STORE_SHARED, uatomic_set) release
 *   RMW     (uatomic_xchg, cmpxchg, add_return, add, sub, inc, dec, and, or)
 *                                                               seq_cst
 * Caveat: the TSan build is therefore stronger-ordered than the release
 * build where liburcu is concerned; the release build relies on liburcu's
 * own (x86: locked instructions, TSO) guarantees, which is what it is for.
 * Our own protocol words are C11 atomics and are checked as shipped.
 *
 * Concurrency Kit: the library uses ck_backoff only, whose sole ck_pr use is
 * ck_pr_barrier (a compiler barrier), so no ck_pr override is needed. If
 * ck_pr loads/stores/CAS ever carry data between threads, override them
 * here before <ck_pr.h> is read (DEPENDENCIES.md), not in the .c files.
 *
 * The urcu headers are read first, so that the definitions below replace
 * theirs; their include guards then make any later #include of them a
 * no-op. They pull in <stdint.h>, hence glibc's <features.h>, before the
 * first line of the .c file: in a TSan build a feature-test macro that a .c
 * file defines itself comes too late. The build therefore passes
 * -D_GNU_SOURCE for the library; .c files must not define _GNU_SOURCE or
 * _POSIX_C_SOURCE themselves (or only under #ifndef).
 */
#ifndef TW_TSAN_SHIM_H
#define TW_TSAN_SHIM_H

#include "sanitizers.h" /* the compiler's word: TW_SAN_THREAD */

#ifdef TW_SAN_THREAD

#define TW_TSAN 1

#include <urcu/compiler.h>
#include <urcu/arch.h>
#include <urcu/system.h>
#include <urcu/uatomic.h>

/* ---- plain shared accesses (urcu/system.h) ---- */

#undef _CMM_LOAD_SHARED
#undef CMM_LOAD_SHARED
#undef _CMM_STORE_SHARED
#undef CMM_STORE_SHARED

/* Load p, acquire: pairs with the release store (or RMW) that published it. */
#define _CMM_LOAD_SHARED(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define CMM_LOAD_SHARED(p)  _CMM_LOAD_SHARED(p)

/* Store v into x, release; evaluates to v as liburcu's version does. */
#define _CMM_STORE_SHARED(x, v)                                              \
    __extension__({                                                          \
        __typeof__(x) tw_shim_v_ = (v);                                      \
        __atomic_store_n(&(x), tw_shim_v_, __ATOMIC_RELEASE);                \
        tw_shim_v_;                                                          \
    })
#define CMM_STORE_SHARED(x, v) _CMM_STORE_SHARED(x, v)

/* ---- uatomic_* (urcu/uatomic/x86.h, urcu/uatomic/generic.h) ---- */

#undef uatomic_read
#undef uatomic_set
#undef uatomic_xchg
#undef uatomic_cmpxchg
#undef uatomic_add_return
#undef uatomic_sub_return
#undef uatomic_add
#undef uatomic_sub
#undef uatomic_inc
#undef uatomic_dec
#undef uatomic_and
#undef uatomic_or

#define uatomic_read(addr) __atomic_load_n((addr), __ATOMIC_ACQUIRE)
#define uatomic_set(addr, v)                                                 \
    ((void)__atomic_store_n((addr), (__typeof__(*(addr)))(v), __ATOMIC_RELEASE))
#define uatomic_xchg(addr, v)                                                \
    __atomic_exchange_n((addr), (__typeof__(*(addr)))(v), __ATOMIC_SEQ_CST)
/* Evaluates to the value found at addr (== old iff the exchange happened). */
#define uatomic_cmpxchg(addr, old, _new)                                     \
    __extension__({                                                          \
        __typeof__(*(addr)) tw_shim_old_ = (__typeof__(*(addr)))(old);       \
        __atomic_compare_exchange_n((addr), &tw_shim_old_,                   \
                                    (__typeof__(*(addr)))(_new), 0,          \
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
        tw_shim_old_;                                                        \
    })
#define uatomic_add_return(addr, v)                                          \
    __atomic_add_fetch((addr), (v), __ATOMIC_SEQ_CST)
#define uatomic_sub_return(addr, v)                                          \
    __atomic_sub_fetch((addr), (v), __ATOMIC_SEQ_CST)
#define uatomic_add(addr, v) ((void)__atomic_add_fetch((addr), (v), __ATOMIC_SEQ_CST))
#define uatomic_sub(addr, v) ((void)__atomic_sub_fetch((addr), (v), __ATOMIC_SEQ_CST))
#define uatomic_inc(addr)    uatomic_add((addr), 1)
#define uatomic_dec(addr)    uatomic_sub((addr), 1)
#define uatomic_and(addr, v) ((void)__atomic_and_fetch((addr), (v), __ATOMIC_SEQ_CST))
#define uatomic_or(addr, v)  ((void)__atomic_or_fetch((addr), (v), __ATOMIC_SEQ_CST))

#endif /* TW_SAN_THREAD */

#endif /* TW_TSAN_SHIM_H */
