/*
 * steal.pml: the handshake between an owned stripe's owner, who takes a
 * max_timers unit by load and store inside its busy window, and sweeps of
 * several arming threads at once (src/service.c: acct_take_owned,
 * steal_begin, owner_left, budget_sweep, steal_end). budget.pml checks
 * the budgets' exactness with one sweeping thread; this checks that two
 * sweeps that overlap never let the owner's store undo a move: `steal` is
 * a count, so the first sweep's end does not open the window under the
 * second's CAS.
 *
 * Modelled: one account (given / taken), its owner (takes in its window or,
 * with steal raised, by CAS; gives; hands a unit back to the pool by CAS
 * when it holds two), the pool, and NS sweepers, each sweeping twice:
 * look, raise steal if the account looks idle, (the heavy fence: Spin's
 * interleavings are sequentially consistent) load busy, and if it is 0
 * move every idle unit to the pool by CAS (C waits a little for 0, then
 * leaves the account to its next round), lower steal. Checked at the
 * end: every unit is somewhere (pool, idle, pending).
 *
 * Broken variants (stress/model/run.sh: each must give a counterexample):
 *   -DBROKEN_STEAL_FLAG   steal is a flag: a sweep's end clears another's
 *   -DBROKEN_NO_LOOK      the sweep moves taken without looking at busy
 *
 *   spin -a steal.pml && gcc -O2 -DSAFETY -o pan pan.c && ./pan
 */
#ifndef NS
#define NS 2          /* sweepers */
#endif
#ifndef OPS
#define OPS 3         /* the owner's takes and gives */
#endif
#define MAX 3         /* max_timers */

byte given = 2;       /* two units idle in the account at the start */
byte taken = 0;
byte pool = 0;
byte pending = 1;     /* one timer pending */
bool busy = 0;
byte steal = 0;
byte done = 0;

/* acct_take: by CAS */
inline cas_take() {
    t = taken;
    g = given;
    do
    :: g > t ->
        atomic {
            if
            :: taken == t -> taken = t + 1; pending++; break
            :: else -> t = taken
            fi
        }
    :: else -> break
    od
}

proctype owner()
{
    byte t, g, ops = 0;
    do
    :: ops < OPS ->
        ops++;
        if
        :: /* acct_take_owned */
            busy = 1;
            if
            :: steal > 0 -> busy = 0; cas_take()
            :: else ->
                t = taken;
                g = given;
                if
                :: g > t -> atomic { taken = t + 1; pending++ }
                :: else -> skip
                fi;
                busy = 0
            fi
        :: /* a give; then, holding two, a unit back to the pool */
            atomic { pending > 0 -> pending--; given++ }
            t = taken;
            if
            :: given - t >= 2 ->
                atomic {
                    if
                    :: taken == t -> taken = t + 1; pool++
                    :: else -> skip
                    fi
                }
            :: else -> skip
            fi
        :: /* a refill from the pool */
            atomic { pool > 0 -> pool--; pending++ }
        fi
    :: else -> break
    od;
    done++
}

proctype sweeper()
{
    byte t, g, r = 0;
    bool raised;
    do
    :: r < 2 ->
        r++;
        /* steal_begin */
        t = taken;
        g = given;
        raised = g > t;
        if
        :: raised ->
#ifdef BROKEN_STEAL_FLAG
            steal = 1;
#else
            steal++;
#endif
#ifdef BROKEN_NO_LOOK
            if
            :: true ->
#else
            if
            :: busy == 0 -> /* owner_left */
#endif
                /* sweep_acct */
                t = taken;
                do
                :: g = given;
                    if
                    :: g <= t -> break
                    :: else ->
                        atomic {
                            if
                            :: taken == t -> taken = g; pool = pool + g - t; break
                            :: else -> t = taken
                            fi
                        }
                    fi
                od
            :: else -> skip /* pass_acct: left for the next round */
            fi;
            /* steal_end */
#ifdef BROKEN_STEAL_FLAG
            steal = 0
#else
            steal--
#endif
        :: else -> skip /* pass_acct: reads only */
        fi
    :: else -> break
    od;
    done++
}

init {
    byte i;
    atomic {
        run owner();
        i = 0;
        do
        :: i < NS -> run sweeper(); i++
        :: else -> break
        od
    }
    (done == NS + 1);
    assert(pool + given - taken + pending == MAX)
}
