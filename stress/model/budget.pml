/*
 * budget.pml: a Promela model of max_timers' budgets (src/service.c,
 * "max_timers: budgets of pending timers"; the give in src/internal.h,
 * tw__budget_give_to, and src/workers.c, ctx_give), checked for the
 * contract's TW_EAGAIN: an arming is refused only if, at some moment of
 * its call, every unit was held by a pending timer.
 *
 * Modelled (each statement is one access to a shared word, as in C):
 *   - accounts: one per thread (its counter stripe) and one for the worker
 *     (thread 0: its batches' runs give there, ctx_give); each is a pair
 *     given / taken, idle units = given - taken. given is written by its
 *     owner alone; taken by CAS (acct_take on the worker's account, the
 *     hand-back, sweep_acct), and by the stripe's owner's take with a load
 *     and a store (acct_take_owned: every thread owns its stripe here)
 *     inside its busy window, when no sweep has raised steal;
 *   - the handshake of busy and steal: the owner stores busy, then loads
 *     steal; a sweep raises steal on the stripes that look idle, then
 *     (after the heavy fence) loads busy, waiting a little for 0
 *     (owner_left), and moves the stripe's taken only if busy is 0
 *     (budget_sweep); a stripe it did not raise steal on, or whose owner
 *     stayed inside, it only reads, and idle units seen there make the
 *     round unclean (pass_acct). The wait is bounded, so here the sweep
 *     either meets busy 0 or passes the stripe. Spin's interleavings are sequentially
 *     consistent: that is what the fence pairing gives these four
 *     accesses (threads.c). Sweeps of several arming threads at once
 *     (steal is a count) are stress/model/steal.pml's: here one thread
 *     sweeps. A relaxed read of taken before given may in C see a take
 *     of a give the given read misses; that only makes a round unclean,
 *     or misses a give that does not happen before the call, which the
 *     contract allows;
 *   - the pool (budget_pool), blocks of B = 1 unit (budget_block: the
 *     smallest, so every second unit in an account is handed back);
 *   - the moves' count (budget_moves): in flight and ended, read as one
 *     word; moves: a refill (pool_refill), a sweep (budget_sweep), a
 *     hand-back (tw__budget_hand_block);
 *   - tw_schedule's take (budget_take): its stripe, then (the worker) its
 *     worker account, then the slow path (budget_take_slow): a refill, then
 *     rounds of moves-read, sweep (noting the given counts read), refill,
 *     moves-read, given counts read again, until two clean rounds in a row
 *     answer TW_EAGAIN;
 *   - a timer leaving pending (a cancel, a one-shot's start) gives its unit
 *     to the giving thread's account, then hands a block back when the
 *     account holds two, or does not look (C looks once a block of gives).
 *     Any thread may end any pending timer (a cancel of a handle armed
 *     elsewhere; a worker runs others' timers).
 *
 * The timer's leaving pending is taken at its give (one step): a cancel
 * that has not returned may be ordered after a refusal (the contract:
 * "a unit given back before a schedule began is found").
 *
 * A slow path that has not answered after ROUNDS rounds leaves the model
 * (in C it goes on looking: two threads that keep sweeping each see the
 * other's moves, so the search would hold their endless rounds; every
 * answer the model allows within ROUNDS rounds is checked).
 *
 * Ghosts: `pending` (units held by pending timers), and per thread in the
 * slow path `sawfull`: pending was MAX at some moment of the call. A
 * refusal asserts sawfull; at the end every unit is somewhere (pool,
 * accounts, pending timers).
 *
 * Broken variants (stress/model/run.sh: each must give a counterexample):
 *   -DBROKEN_NO_GIVEN_CHECK  a clean round ignores gives during it (with
 *                            -DCLEAN=1: one clean round answers)
 *   -DBROKEN_SWEEP_NO_WORKER the sweep and its second look skip the
 *                            worker's account (-DINIT_ACCT=3: a unit
 *                            idle there at the start)
 *   -DBROKEN_SWEEP_NO_BUSY   the sweep moves an owned stripe's taken
 *                            without looking at busy (an owner's store
 *                            undoes the move: a unit counted twice)
 *
 * stress/model/run.sh runs it; by hand:
 *   spin -a budget.pml && gcc -O2 -DSAFETY -DCOLLAPSE -o pan pan.c && ./pan
 */

#ifndef NT
#define NT 3          /* threads: 0 sweeps (one arming call), 1 and 2 arm
                         and end timers; the last is a worker */
#endif
#ifndef MAX
#define MAX 2         /* max_timers */
#endif
#ifndef NOPS
#define NOPS 4        /* arms and ends per arming-and-ending thread */
#endif
#ifndef INIT_PENDING
#define INIT_PENDING 1
#endif
#ifndef INIT_ACCT
#define INIT_ACCT 1   /* where the idle units are at the start */
#endif
#ifndef CLEAN
#define CLEAN 2       /* clean rounds in a row that answer TW_EAGAIN */
#endif
#define NACC (NT + 1) /* stripes 0 .. NT-1, the worker's account NT */
#define WACC NT
#ifdef BROKEN_SWEEP_NO_WORKER
#define SWEPT NT      /* budget_accts without the workers' */
#else
#define SWEPT NACC    /* the accounts a sweep looks at (budget_accts) */
#endif
#ifndef ROUNDS
#define ROUNDS 4      /* slow-path rounds modelled per call (below) */
#endif
#define MOVES_MOD 32  /* ended moves wrap (C: 32 bits); more than all the
                         moves the other threads make in one round */

byte given[NACC];
byte taken[NACC];
bool busy[NACC];     /* a stripe's owner is inside acct_take_owned */
byte steal[NACC];    /* sweeps that raised steal on the stripe */
byte pool = MAX;
byte pending = 0;
byte inflight = 0;   /* budget_moves, low half */
byte ended = 0;      /* budget_moves, high half (wraps) */
bool incall[NT];
bool sawfull[NT];
byte done = 0;

/* pending just grew: a slow path in progress saw every unit pending */
inline note_full() {
    if
    :: pending == MAX ->
        k = 0;
        do
        :: k < NT -> sawfull[k] = sawfull[k] || incall[k]; k++
        :: else -> break
        od
    :: else -> skip
    fi
}

inline move_begin() { inflight++ }
inline move_end() { atomic { inflight--; ended = (ended + 1) % MOVES_MOD } }

/* acct_take: one unit from account a, or none (took) */
inline acct_take(a) {
    t = taken[a];
    g = given[a];
    took = 0;
    do
    :: g > t ->
        atomic {
            if
            :: taken[a] == t -> taken[a] = t + 1; pending++; took = 1; note_full()
            :: else -> t = taken[a]
            fi
        }
        if
        :: took -> break
        :: else -> skip
        fi
    :: else -> break
    od
}

/* acct_take_owned: the stripe's owner, by load and store unless a sweep
 * raised steal */
inline acct_take_owned(a) {
    busy[a] = 1;
    if
    :: steal[a] > 0 -> busy[a] = 0; acct_take(a)
    :: else ->
        t = taken[a];
        g = given[a];
        if
        :: g > t -> atomic { taken[a] = t + 1; pending++; took = 1; note_full() }
        :: else -> took = 0
        fi;
        busy[a] = 0
    fi
}

/* pool_refill with blocks of 1: a unit from the pool for the caller */
inline pool_refill() {
    move_begin();
    atomic {
        if
        :: pool > 0 -> pool--; pending++; took = 1; note_full()
        :: else -> took = 0
        fi
    }
    move_end()
}

/* sweep_acct: every idle unit of account a into the pool; adds the given
 * count it read to sum */
inline sweep_acct(a) {
    t = taken[a];
    do
    :: g = given[a];
        if
        :: g <= t -> sum = sum + g; break
        :: else ->
            atomic {
                if
                :: taken[a] == t -> taken[a] = g; cas = 1
                :: else -> t = taken[a]; cas = 0
                fi
            }
            if
            :: cas -> pool = pool + (g - t); sum = sum + g; break
            :: else -> skip
            fi
        fi
    od
}

/* pass_acct: an owned stripe the sweep did not raise steal on (it looked
 * empty), or whose owner stayed inside its window: idle units seen there
 * make the round unclean; adds the given count it read to sum */
inline pass_acct(a) {
    t = taken[a];
    g = given[a];
    held = held || g > t;
    sum = sum + g
}

/* tw__budget_hand_block: the account holds two blocks: one to the pool */
inline hand_back(a) {
    t = taken[a];
    if
    :: given[a] - t >= 2 ->
        move_begin();
        atomic {
            if
            :: taken[a] == t -> taken[a] = t + 1; cas = 1
            :: else -> cas = 0
            fi
        }
        if
        :: cas -> pool++
        :: else -> skip
        fi;
        move_end()
    :: else -> skip
    fi
}

/* dead locals back to 0 after each call (fewer states) */
inline forget() {
    d_step { t = 0; g = 0; took = 0; cas = 0 }
}

/* Thread 0: one tw_schedule whose stripe is empty and the pool too
 * (budget_take_slow: the path that answers TW_EAGAIN). */
proctype sweeper()
{
    byte t, g, i, k, sum, sumnow, b_in, b_end, a_in, a_end, clean, round, raised;
    bool took, cas, alone, held;
    atomic { incall[0] = 1; sawfull[0] = (pending == MAX) }
    pool_refill();
    clean = 0;
    round = 0;
    do
    :: took -> break
    :: round == ROUNDS -> break /* still looking: no answer yet */
    :: else ->
        round++;
        atomic { b_in = inflight; b_end = ended }
        move_begin();
        sum = 0;
        held = 0;
        /* steal_begin: raise steal on the stripes that look idle */
        raised = 0;
        i = 0;
        do
        :: i < NT ->
            t = taken[i];
            g = given[i];
            if
            :: g > t -> steal[i]++; raised = raised | (1 << i)
            :: else -> skip
            fi;
            i++
        :: else -> break
        od;
        i = 0;
        do
        :: i < SWEPT ->
            if
            :: i == WACC -> sweep_acct(i)
#ifdef BROKEN_SWEEP_NO_BUSY
            :: i != WACC -> sweep_acct(i)
#else
            :: i != WACC && (raised & (1 << i)) && !busy[i] -> sweep_acct(i)
            :: i != WACC && !((raised & (1 << i)) && !busy[i]) -> pass_acct(i)
#endif
            fi;
            i++
        :: else -> break
        od;
        /* steal_end */
        i = 0;
        do
        :: i < NT ->
            if
            :: raised & (1 << i) -> steal[i]--
            :: else -> skip
            fi;
            i++
        :: else -> break
        od;
        move_end();
        pool_refill();
        if
        :: took -> break
        :: else -> skip
        fi;
        atomic { a_in = inflight; a_end = ended }
        sumnow = 0;
        i = 0;
        do
        :: i < SWEPT -> sumnow = sumnow + given[i]; i++
        :: else -> break
        od;
#ifdef BROKEN_NO_GIVEN_CHECK
        sumnow = sum;
#endif
        alone = (!held && b_in == 0 && a_in == b_in &&
                 a_end == (b_end + 2) % MOVES_MOD && sumnow == sum);
        if
        :: alone -> clean++
        :: else -> clean = 0
        fi;
        if
        :: clean == CLEAN ->
            /* TW_EAGAIN: every unit was pending at some moment of the call */
            assert(sawfull[0]);
            break
        :: else -> skip
        fi
    od;
    atomic { incall[0] = 0; done++ }
}

/* Threads 1 .. NT-1: arm (their stripe; the worker also its account; an
 * empty one takes from the pool, one counted move, and no further: the
 * sweep is thread 0's) or end any pending timer (to their account; the
 * worker's runs to the worker's account), NOPS times. */
proctype mutator(byte me)
{
    byte ops = 0, t, g, k, mine;
    bool took, cas;
    mine = (me == NT - 1 -> WACC : me);
    do
    :: ops < NOPS ->
        ops++;
        if
        :: acct_take_owned(me);
            if
            :: !took && me == NT - 1 -> acct_take(WACC)
            :: else -> skip
            fi;
            if
            :: !took -> pool_refill()
            :: else -> skip
            fi
        :: atomic { pending > 0 -> pending--; given[mine]++ }
            /* C looks for a block to hand back once a block of gives
             * (tw__budget_give_to): any give may skip it */
            if
            :: hand_back(mine)
            :: skip
            fi
        fi;
        forget()
    :: else -> break
    od;
    done++
}

init {
    byte i;
    /* INIT_PENDING timers armed, the other units idle in account
     * INIT_ACCT (the pool empty: the sweeper goes to its slow path) */
    atomic {
        pending = INIT_PENDING;
        pool = 0;
        given[INIT_ACCT] = MAX - INIT_PENDING;
        run sweeper();
        i = 1;
        do
        :: i < NT -> run mutator(i); i++
        :: else -> break
        od
    }
    (done == NT);
    /* every unit is somewhere */
    byte idle = 0;
    i = 0;
    do
    :: i < NACC -> idle = idle + given[i] - taken[i]; i++
    :: else -> break
    od;
    assert(pool + idle + pending == MAX)
}
