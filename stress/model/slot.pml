/*
 * slot.pml: a Promela model of timerwheel's slot protocol, as implemented
 * in src/slots.c and src/wheel.c, with the record state word of
 * src/records.c and src/service.c where it races the drain.
 *
 * Modelled (each step's comment names the C function it stands for):
 *   - the slot counter word rot | closed | count (tw_slot.word): reserve by
 *     CAS in the producer's epoch (tw__slot_reserve), refusal as NEWER
 *     (the cursor moved on: re-read the cursor) or CLOSED (the drain is in
 *     progress: go to a late slot, place_late / tw__slot_reserve_any);
 *   - publish by CAS from EMPTY(e <= epoch) (tw__slot_publish); a
 *     tombstoned (or otherwise refused) publish places the timer again;
 *   - the drain: close (fetch_or closed, slot_close), exchange every
 *     reserved entry with EMPTY(next epoch) = the tombstone
 *     (drain_reserved), reopen at the next rotation; the two late slots
 *     (tw__slot_drain_late), drained every step;
 *   - positions beyond slot_capacity (the overflow segments: here simply
 *     more positions, as ensure_room makes the memory before reserving);
 *   - the hierarchical placement (place_once: t = max(k, c + 1), level,
 *     epoch, slot; beyond the span the top level re-places), the step over
 *     a range of ticks (tw__wheel_step, drain_level, take_entry: claim
 *     PENDING -> FIRING, re-place a timer not yet due, keep an entry at
 *     T + 1 when a lease is met);
 *   - cancel racing the drain and the run (cancel_record: one CAS on the
 *     state word; ZOMBIE when a lease is held), reschedule racing the
 *     drain (reschedule_record, move_pending, tw__lease_publish: the lease,
 *     the version bump on release, taking back a claimed timer);
 *   - running a claimed timer (tw__run_timer / claim_run: FIRING ->
 *     RUNNING, then finish_oneshot), as MANUAL / workers = 0 do, on the
 *     drainer after its step.
 * How it steps: see "how the model steps" below (one atomic step per
 * access to shared state).
 * Not modelled: occupancy bits and sleeping (they only decide when the
 * cursor steps, never what a step does), periodic timers, record reuse
 * (each timer has its own record: the generation tag is checked by the C
 * unit and fuzz tests), tw_stop, memory orders (Spin interleaves; the
 * orders are TSan's job in the stress tests), the 31-bit wrap of rot.
 *
 * Properties, checked on every interleaving:
 *   1. none fired twice                    assert in the run step
 *   2. none fired before its tick          assert in the run step (deadline <= T)
 *   3. a cancel that said OK never fires, a fired timer is never cancelled
 *   4. none placed a rotation late: every entry a drain takes was published
 *      for exactly the epoch that drain collects
 *   5. none late, none without an entry: when a step over (c, T] begins,
 *      every settled timer (PENDING, no lease, no arming call still placing
 *      it) has a published entry; after the step's takes, every such timer
 *      that is still PENDING, unleased, unmoved and due by T was claimed
 *   6. no timer lost: once the producers are done and the clock has passed
 *      every deadline, every armed timer fired xor was cancelled, and every
 *      record is FREE
 *   7. no deadlock: every process ends (pan's invalid end state check);
 *      and, in the non-progress run, the model has no cycle at all, so no
 *      reserve, publish or CAS loop can retry forever (lock-freedom).
 * Every rare path (RARE(n) below) is reachable: run.sh compiles the model
 * with -DREACH=n for each and requires the assertion to be hit.
 *
 * Broken variants (each must give a counterexample):
 *   -DBROKEN_NO_TOMBSTONE  the drain takes published values but leaves
 *                          reserved, unpublished entries alone, so a late
 *                          publish succeeds into the reopened slot and
 *                          waits there a whole rotation (property 5 fails
 *                          first; 4 or 6 follow);
 *   -DBROKEN_NO_VERSION    releasing a lease does not bump the version, so
 *                          the drain's claim CAS succeeds on a deadline it
 *                          read before a reschedule moved it (property 2).
 *
 * Sizes: -DLEVELS=1|2 (2 slots per level), -DCAP=1|2, -DNPROD=2|3
 * (producer 0: schedule, then reschedule / cancel / nothing; producer 1:
 * schedule, then cancel producer 0's timer / reschedule / cancel its own;
 * producer 2: schedule), -DNO_SECOND (schedule only), -DMAXT (ticks
 * stepped while producers run; then one jump over every deadline), -DDMAX
 * (largest delay, ticks), -DJUMP (the drainer may step two ticks at once).
 *
 * Commands (stress/model/run.sh runs these and more; -DCOLLAPSE keeps the
 * search exhaustive in less memory):
 *   spin -DMAXT=1 -DDMAX=2 -a slot.pml
 *   gcc -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=3072 -o pan pan.c
 *   ./pan -m200000                     # "errors: 0", 21.6M states, ~35 s, 1.1 GB
 *   spin -DMAXT=1 -DDMAX=1 -a slot.pml
 *   gcc -O2 -DNP -DCOLLAPSE -DMEMLIM=3072 -o pan pan.c
 *   ./pan -l -m200000                  # no non-progress cycle: "errors: 0"
 *   spin -DMAXT=1 -DDMAX=1 -DBROKEN_NO_TOMBSTONE -a slot.pml
 *   gcc -O2 -DSAFETY -o pan pan.c && ./pan -m200000     # "errors: 1"
 *   spin -t -p -DMAXT=1 -DDMAX=1 -DBROKEN_NO_TOMBSTONE slot.pml   # the trail
 */

/* ---- sizes ------------------------------------------------------------ */

#define S      2            /* slots per level (wheel_slots) */
#define BITS   1            /* log2(S) */
#ifndef LEVELS
#define LEVELS 1
#endif
#ifndef CAP
#define CAP    1            /* slot_capacity */
#endif
#ifndef NPROD
#define NPROD  2
#endif
#ifndef MAXT
#define MAXT   1
#endif
#ifndef DMAX
#define DMAX   2
#endif
#define NT     NPROD        /* timers: producer p owns timer p */
#define MAXPOS (CAP + 3)    /* positions per slot: CAP, then overflow */
#define NLATE  2
#define LATE0  (LEVELS * S)
#define NSL    (LEVELS * S + NLATE)
#define NENT   (NSL * MAXPOS)
#define KMAX   (MAXT + DMAX) /* no deadline beyond this tick */

/* ---- the slot counter word: rot << 4 | closed (8) | count (0..7) ------ */

#define W_COUNT(w)  ((w) & 7)
#define W_CLOSED    8
#define W_ROT(w)    ((w) >> 4)
#define W_OPEN(r)   ((r) << 4)

/* ---- entries: EMPTY(e) = e (< 128), VALUE(timer i) = 128 + i ---------- */

#define VALUE       128
#define IS_VALUE(v) ((v) >= VALUE)

/* ---- record state word: gen << 8 | ver << 4 | LEASE (8) | st ---------- */

#define FREE     0
#define PENDING  1
#define FIRING   2
#define RUNNING  3
#define ZOMBIE   4
#define ST(w)    ((w) & 7)
#define LEASE    8
#define VER(w)   (((w) >> 4) & 15)
#define GEN(w)   ((w) >> 8)
#define WITH_ST(w, s)  (((w) & ~7) | (s))
#define VER_BUMP(w)    (((w) & ~240) | (((VER(w) + 1) & 15) << 4))
#define FREE_STATE(w)  ((GEN(w) + 1) << 8)
#define HGEN     1          /* the generation every handle of the model has */

/* results of a reservation */
#define R_RETRY  0
#define R_OK     1
#define R_NEWER  2
#define R_CLOSED 3

/* ---- shared state ------------------------------------------------------- */

byte cur;                   /* tw_wheel.cur */
byte word[NSL];             /* tw_slot.word; LATE0.. are the late slots */
byte ent[NENT];             /* slot entries, MAXPOS per slot */
short rst[NT];              /* tw_record.state */
byte dl[NT];                /* tw_record.deadline, in ticks */

/* ghosts (the checker's, not the library's) */
byte pube[NENT];            /* epoch a value was published for */
byte nent[NT];              /* published, not yet taken entries per timer */
bit  armed[NT];
bit  fired[NT];
bit  cancelled[NT];         /* a cancel returned OK */
bit  busy[NT];              /* an arming call (schedule, reschedule) is placing it */
bit  snap[NT];              /* settled (pending, not busy) when the step began */
byte nmove[NT];             /* leases taken on it (deadline moves) */
byte snapver[NT];
byte ndone;                 /* producers finished */

/* Rare paths: RARE(n) is a no-op, unless the model is compiled with
 * -DREACH=n: then reaching path n is an assertion violation, which is how
 * run.sh proves that every rare path is reachable in the model. */
#ifndef REACH
#define REACH 0
#endif
#define RARE(n) assert(REACH != (n))
#define R_TOMBSTONED      1
#define R_NEWER_SEEN      2
#define R_LATE_SLOT       3
#define R_CANCEL_LOST     4
#define R_LEASE_MET       5
#define R_RESCHED_FIRING  6
#define R_OVERFLOW        7

/* ---- how the model steps ----------------------------------------------------
 *
 * Every atomic block below is one access to shared state (with the local
 * computation around it), so Spin interleaves the processes exactly at the
 * C code's atomic operations. A C retry loop of the form "load the word,
 * compute the new value from it alone, CAS, on failure retry" is one atomic
 * step here: its successful CAS (or the load that made it give up) is its
 * only effect, so nothing is lost by taking it in one go. Where the C code
 * reads another word between its load and its CAS (take_entry reads the
 * deadline), the steps are separate. Local variables are reset once dead,
 * so that they do not multiply the states.
 */

/* examine a slot word read into pw: closed, newer than our rot, or try */
#define EXAMINE(rot) \
    if \
    :: (pw & W_CLOSED) -> prc = R_CLOSED \
    :: !(pw & W_CLOSED) && W_ROT(pw) > (rot) -> prc = R_NEWER \
    :: !(pw & W_CLOSED) && W_ROT(pw) <= (rot) -> prc = R_OK \
    fi

#define RESET_PLACE \
    pl = 0; pe = 0; psi = 0; prot = 0; pw = 0; prc = 0; pj = 0

/* ---- placement (any thread) ---------------------------------------------- */

/* place_once (wheel.c), its first half: load cur (acquire) and aim: the
 * target t = max(k, cur + 1), its level, epoch e, slot and rotation. */
inline aim(k)
{
    pe = ((k) > cur -> (k) : cur + 1);              /* t */
    pl = (pe - cur >= 4 -> 2 : (pe - cur >= 2 -> 1 : 0));
    if
    :: pl >= LEVELS ->                  /* beyond the span: the top re-places */
        pl = LEVELS - 1;
        pe = cur + (1 << (pl * BITS + BITS)) - 1
    :: else -> skip
    fi;
    pe = (pe >> (pl * BITS)) << (pl * BITS);        /* the epoch */
    psi = pl * S + ((pe >> (pl * BITS)) & (S - 1));
    prot = pe >> (pl * BITS + BITS)
}

/* tw__slot_publish (slots.c): CAS the entry from EMPTY(e <= epoch) to our
 * VALUE and leave the placement loop; a tombstone (EMPTY of a later epoch)
 * or a VALUE refuses it, and place_once / place_late answer "place again":
 * back to aim. (A refused publish writes nothing and stays refused, so
 * taking the re-read of cur in the same step loses no interleaving.) */
inline publish(si, pos, epoch, i, k, own)
{
    atomic {
        if
        :: (pos) >= CAP -> RARE(R_OVERFLOW)    /* stats.overflowed */
        :: else -> skip
        fi;
        if
        :: !IS_VALUE(ent[(si) * MAXPOS + (pos)]) &&
           ent[(si) * MAXPOS + (pos)] <= (epoch) ->
            pube[(si) * MAXPOS + (pos)] = (epoch);
            ent[(si) * MAXPOS + (pos)] = VALUE + (i);
            nent[i]++;
            if
            :: own -> busy[i] = 0           /* the arming call's placement is done */
            :: else -> skip
            fi;
            RESET_PLACE;
            break                           /* placed */
        :: else ->
            RARE(R_TOMBSTONED);                 /* TW_RARE_TOMBSTONED */
            RESET_PLACE;
            aim(k)
        fi
    }
}

/* place_late (wheel.c) + tw__slot_reserve_any (slots.c): reserve in
 * whichever late slot is open (one is: the drain closes them in turn),
 * publish for its round. */
inline place_late(i, k, own)
{
    do
    :: atomic {                             /* reserve_any: load, CAS count + 1 */
        pw = word[LATE0 + pj];
        if
        :: (pw & W_CLOSED) -> pj = 1 - pj   /* being drained: the other one */
        :: else ->
            assert(W_COUNT(pw) < MAXPOS);
            word[LATE0 + pj] = pw + 1;
            break
        fi
       }
    od;
    publish(LATE0 + pj, W_COUNT(pw), W_ROT(pw), i, k, own)
}

/* tw__place / place_once (wheel.c) after aim(k): reserve, publish; again
 * until published. (A NEWER refusal writes nothing and stays a refusal,
 * so the re-read of cur is taken in the same step.) */
inline place_aimed(i, k, own)
{
    do
    :: atomic {                             /* tw__slot_reserve: load, CAS count + 1 */
        pw = word[psi];
        EXAMINE(prot);
        if
        :: prc == R_OK ->
            assert(W_COUNT(pw) < MAXPOS);
            word[psi] = pw + 1
        :: prc == R_NEWER ->
            RARE(R_NEWER_SEEN);                 /* TW_RARE_NEWER: re-read cur */
            RESET_PLACE;
            aim(k)
        :: prc == R_CLOSED ->
            RARE(R_LATE_SLOT);                  /* TW_RARE_LATE_SLOT */
            pj = 0
        fi
       }
       if
       :: prc == R_CLOSED ->
           place_late(i, k, own)
       :: prc == R_OK ->
           /* the epoch the word was open for: ours, or an older one */
           publish(psi, W_COUNT(pw),
                   pe - (prot - W_ROT(pw)) * (1 << (pl * BITS + BITS)), i, k, own)
       :: else -> skip
       fi
    od
}

/* tw__place: aim, then reserve and publish */
inline place(i, k, own)
{
    atomic { aim(k) }
    place_aimed(i, k, own)
}

/* ---- the drainer (tw__wheel_step and what it calls) ----------------------- */

/* next_epoch_after (wheel.c): the first epoch of slot (l, i) after tick x */
inline next_epoch_after(l, i, x, res)
{
    res = ((x) & ~((1 << ((l) * BITS + BITS)) - 1)) + ((i) << ((l) * BITS));
    if
    :: res <= (x) -> res = res + (1 << ((l) * BITS + BITS))
    :: else -> skip
    fi
}

/* the drain's exchange of entry dp of slot si with EMPTY(nexte) (acq_rel):
 * a VALUE is taken, an EMPTY (reserved, not published) becomes the
 * tombstone that makes the late publish fail. */
inline take_one(si, nexte, E, islate)
{
    atomic {
        dp < dn ->
        dv = ent[(si) * MAXPOS + dp];
#ifdef BROKEN_NO_TOMBSTONE
        if
        :: IS_VALUE(dv) -> ent[(si) * MAXPOS + dp] = (nexte)
        :: else -> skip             /* BROKEN: the reservation keeps its EMPTY */
        fi;
#else
        ent[(si) * MAXPOS + dp] = (nexte);
#endif
        if
        :: IS_VALUE(dv) ->
            nent[dv - VALUE]--;
            /* property 4: taken in the epoch it was published for */
            assert(islate || pube[(si) * MAXPOS + dp] == (E));
            pube[(si) * MAXPOS + dp] = 0;
            taken[ntk] = dv - VALUE + 1;
            ntk++
        :: else -> skip
        fi;
        dv = 0;
        dp++
    }
}

/* The slots a step over (sc, T] drains (drain_level, wheel.c): every
 * slot whose epoch lies in the range, at most S per level; bit l * S + i
 * of dmask. */
inline slots_to_drain()
{
    dl_ = 0;
    do
    :: dl_ < LEVELS ->
        dE = (sc >> (dl_ * BITS)) + 1;      /* first */
        dnext = T >> (dl_ * BITS);          /* last */
        if
        :: dnext < dE -> skip
        :: dnext >= dE && dnext - dE + 1 >= S ->
            dmask = dmask | (((1 << S) - 1) << (dl_ * S))
        :: dnext >= dE && dnext - dE + 1 < S ->
            do
            :: dE <= dnext -> dmask = dmask | (1 << (dl_ * S + (dE & (S - 1)))); dE++
            :: else -> break
            od
        fi;
        dl_++
    :: else -> dl_ = 0; dE = 0; dnext = 0; break
    od
}

/* tw__wheel_step (wheel.c), first part: publish cur = T (release); the
 * checker's snapshot for property 5. */
inline step_begin()
{
    sc = cur;
    cur = T;
    gi = 0;
    do
    :: gi < NT ->
        snap[gi] = (ST(rst[gi]) == PENDING && !(rst[gi] & LEASE) && !busy[gi]);
        /* every armed, settled timer has an entry (none is lost) */
        assert(!snap[gi] || nent[gi] > 0);
        snapver[gi] = nmove[gi];
        gi++
    :: else -> gi = 0; break
    od;
    slots_to_drain();
    dord = 0
}

/* drain_slot (wheel.c) + tw__slot_drain (slots.c) for every slot of
 * dmask, top level first: close (fetch_or, acq_rel), exchange each
 * reserved entry, reopen at the slot's next rotation (release). */
inline drain_levels()
{
    do
    :: atomic {
        dmask != 0 ->
        do                          /* the next slot, top level first */
        :: dsi = (LEVELS - 1 - dord / S) * S + dord % S;
           dord++;
           if
           :: dmask & (1 << dsi) -> dmask = dmask & ~(1 << dsi); break
           :: else -> skip
           fi
        od;
        dl_ = dsi / S;
        next_epoch_after(dl_, dsi % S, sc, dE);     /* the epoch collected */
        next_epoch_after(dl_, dsi % S, T, dnext);
        dn = W_COUNT(word[dsi]);    /* slot_close */
        word[dsi] = word[dsi] | W_CLOSED;
        dp = 0
       }
       do
       :: take_one(dsi, dnext, dE, false)
       :: atomic {
           dp >= dn ->
           assert((dnext >> (dl_ * BITS + BITS)) < 16);
           word[dsi] = W_OPEN(dnext >> (dl_ * BITS + BITS));   /* reopen */
           dn = 0; dp = 0; dE = 0; dnext = 0; dl_ = 0; dsi = 0;
           break
          }
       od
    :: atomic { dmask == 0 -> dord = 0; break }
    od
}

/* tw__slot_drain_late (slots.c): a late slot moves to its next round only
 * if something was reserved in it. */
inline drain_late(j)
{
    atomic {
        drot = W_ROT(word[LATE0 + j]);
        dn = W_COUNT(word[LATE0 + j]);
        word[LATE0 + j] = word[LATE0 + j] | W_CLOSED;     /* slot_close */
        dp = 0
    }
    do
    :: take_one(LATE0 + j, drot + 1, 0, true)
    :: atomic {
        dp >= dn ->
        if
        :: dn > 0 -> word[LATE0 + j] = W_OPEN(drot + 1)   /* next round */
        :: else -> word[LATE0 + j] = W_OPEN(drot)         /* nobody came: same round */
        fi;
        dn = 0; dp = 0; drot = 0;
        break
       }
    od
}

/* take_entry (wheel.c): claim a due timer (PENDING -> FIRING), re-place
 * one not yet due, keep an entry at T + 1 when a reschedule holds the
 * lease, skip a dead one. Starts with the load of the state (acquire). */
inline take_entry()
{
    do
    :: ST(tst) != PENDING -> break  /* cancelled, claimed, ... */
    :: ST(tst) == PENDING && (tst & LEASE) ->
        RARE(R_LEASE_MET);          /* TW_RARE_LEASE_MET */
        place(ti, T + 1, false);
        break
    :: ST(tst) == PENDING && !(tst & LEASE) ->
        tdd = dl[ti];               /* load the deadline (relaxed) */
        if
        :: tdd > T ->
            place(ti, tdd, false);         /* cascade / pushed later */
            break
        :: else ->
            atomic {                /* CAS PENDING -> FIRING (acq_rel) */
                if
                :: rst[ti] == tst ->
                    rst[ti] = WITH_ST(tst, FIRING);
                    due[ndue] = ti + 1;
                    ndue++;
                    tst = 0         /* done */
                :: else -> tst = rst[ti]
                fi;
                tdd = 0
            }
        fi
    od
}

/* tw__wheel_step (wheel.c) after step_begin, then tw__deliver (inline) */
inline step_rest()
{
    drain_levels();
    drain_late(0);
    drain_late(1);
    do
    :: atomic {
        sk < ntk ->
        ti = taken[sk] - 1;
        taken[sk] = 0;
        sk++;
        tst = rst[ti]               /* take_entry: load the state (acquire) */
       }
       take_entry();
       atomic { ti = 0; tst = 0; tdd = 0 }
    :: atomic {
        sk >= ntk ->
        /* property 5: nothing that was placed and due is left behind */
        gi = 0;
        do
        :: gi < NT ->
            assert(!(snap[gi] && ST(rst[gi]) == PENDING && !(rst[gi] & LEASE) &&
                     nmove[gi] == snapver[gi] && dl[gi] <= T));
            snap[gi] = 0;
            snapver[gi] = 0;
            gi++
        :: else -> gi = 0; break
        od;
        sk = 0;
        ntk = 0;
        break
       }
    od;
    /* tw__deliver -> tw__run_timer (workers.c): claim_run FIRING -> RUNNING
     * (seq_cst), the callback (the oracle's checks), finish_oneshot */
    do
    :: atomic {
        sk < ndue ->
        ti = due[sk] - 1;
        due[sk] = 0;
        sk++;
        if
        :: ST(rst[ti]) == FIRING ->
            rst[ti] = WITH_ST(rst[ti], RUNNING);
            assert(!fired[ti]);         /* property 1 */
            assert(dl[ti] <= T);        /* property 2 */
            assert(!cancelled[ti]);     /* property 3 */
            fired[ti] = 1
        :: else -> ti = NT              /* cancelled, taken back */
        fi
       }
       if
       :: ti < NT -> atomic { rst[ti] = FREE_STATE(rst[ti]); ti = 0 }
       :: else -> ti = 0
       fi
    :: atomic { sk >= ndue -> sk = 0; ndue = 0; sc = 0; break }
    od
}

#define PLACE_LOCALS \
    byte pl, pe, psi, prot, pw, prc, pj

proctype drainer()
{
    PLACE_LOCALS;
    byte T, sc, gi, sk;
    byte dmask, dord, dsi, dl_, dn, dp, dv, dE, dnext, drot;
    byte taken[NENT];               /* timer + 1 per entry taken in this step */
    byte ntk;
    byte due[NT];                   /* timer + 1 per claimed timer */
    byte ndue;
    byte ti;
    short tst;
    byte tdd;

    do
    :: atomic { cur < MAXT -> T = cur + 1; step_begin() }
       step_rest()
#ifdef JUMP
    :: atomic { cur + 1 < MAXT -> T = cur + 2; step_begin() }
       step_rest()
#endif
    :: atomic { cur >= MAXT -> break }
    od;
    /* the harness: once the producers are done, one step over every
     * remaining deadline (a tw_advance jump) */
    atomic { ndone == NPROD -> T = KMAX; step_begin() }
    step_rest();
    /* property 6: no timer lost, none both fired and cancelled, all FREE */
    atomic {
        gi = 0;
        do
        :: gi < NT ->
            assert(!armed[gi] || fired[gi] + cancelled[gi] == 1);
            assert(ST(rst[gi]) == FREE);
            gi++
        :: else -> break
        od
    }
}

/* ---- producers (service.c) -------------------------------------------------- */

/* schedule_common + schedule_commit: deadline = now + delay, the record
 * published PENDING (seq_cst), then placed. */
inline schedule(i)
{
    atomic {
        select (k : cur .. cur + DMAX);
        dl[i] = k;
        rst[i] = WITH_ST(rst[i], PENDING);
        armed[i] = 1;
        busy[i] = 1;
        /* tw__place: its load of cur is in this step too (nobody can see
         * the timer before it has an entry, so nothing is lost) */
        aim(k)
    }
    place_aimed(i, k, true)
}

/* cancel_record: CAS from PENDING (ZOMBIE if a lease is held) or FIRING;
 * ENOENT when the timer started (TW_RARE_CANCEL_LOST) or is stale. */
inline cancel(i)
{
    atomic {
        if
        :: GEN(rst[i]) == HGEN && ST(rst[i]) == PENDING && (rst[i] & LEASE) ->
            rst[i] = WITH_ST(rst[i], ZOMBIE);
            assert(!fired[i]);          /* property 3 */
            cancelled[i] = 1
        :: GEN(rst[i]) == HGEN && ((ST(rst[i]) == PENDING && !(rst[i] & LEASE)) ||
                                   ST(rst[i]) == FIRING) ->
            rst[i] = FREE_STATE(rst[i]);
            assert(!fired[i]);          /* property 3 */
            cancelled[i] = 1
        :: else ->                      /* ENOENT */
            if
            :: fired[i] -> RARE(R_CANCEL_LOST)  /* TW_RARE_CANCEL_LOST */
            :: else -> skip             /* not armed yet, or cancelled already */
            fi
        fi
    }
}

/* reschedule_record, move_pending, tw__lease_publish (records.c) */
inline reschedule(i)
{
    atomic {
        select (k : cur .. cur + DMAX);
        if                              /* take the lease (acq_rel) */
        :: GEN(rst[i]) == HGEN && (ST(rst[i]) == PENDING || ST(rst[i]) == FIRING) &&
           !(rst[i] & LEASE) ->
            rplace = (ST(rst[i]) == FIRING);    /* taken back: place again */
            if
            :: rplace -> RARE(R_RESCHED_FIRING)  /* TW_RARE_RESCHED_FIRING */
            :: else -> skip
            fi;
            rst[i] = WITH_ST(rst[i], PENDING) | LEASE;
            busy[i] = 1;
            nmove[i]++;
            rtook = true
        :: else -> skip                 /* ENOENT (or overtaken) */
        fi
    }
    if
    :: rtook ->
        atomic {                        /* move_pending: write the deadline */
            rplace = rplace || k < dl[i];       /* earlier: place now */
            dl[i] = k
        }
        atomic {                        /* tw__lease_publish */
            if
            :: ST(rst[i]) == ZOMBIE ->  /* a cancel ended it: we free it */
                rst[i] = FREE_STATE(rst[i]);
                rplace = false;
                busy[i] = 0
            :: else ->                  /* release the lease (release) */
#ifdef BROKEN_NO_VERSION
                rst[i] = rst[i] & ~LEASE
#else
                rst[i] = VER_BUMP(rst[i] & ~LEASE)
#endif
                ;
                busy[i] = rplace
            fi
        }
        if
        :: rplace -> place(i, k, true)
        :: else -> skip
        fi
    :: else -> skip
    fi;
    atomic { k = 0; rtook = false; rplace = false }
}

proctype producer(byte me)
{
    PLACE_LOCALS;
    byte k;
    bool rtook, rplace;

    schedule(me);
#ifndef NO_SECOND

    if
    :: me == 0 ->
        if
        :: true -> reschedule(0)
        :: true -> cancel(0)
        :: true -> skip
        fi
    :: me == 1 ->
        if
        :: true -> cancel(0)        /* another thread's timer: races its reschedule */
        :: true -> reschedule(1)
        :: true -> cancel(1)
        fi
    :: else -> skip                 /* more producers: contention, overflow */
    fi;
#endif
    ndone++
}

init {
    byte l, i, e;
    atomic {
        l = 0;
        do
        :: l < LEVELS ->
            i = 0;
            do
            :: i < S ->
                next_epoch_after(l, i, 0, e);
                word[l * S + i] = W_OPEN(e >> (l * BITS + BITS));
                i++
            :: else -> break
            od;
            l++
        :: else -> break
        od;
        i = 0;
        do
        :: i < NT -> rst[i] = HGEN << 8; i++    /* FREE, generation 1 */
        :: else -> break
        od;
        l = 0; i = 0; e = 0;
        run drainer();
        i = 0;
        do
        :: i < NPROD -> run producer(i); i++
        :: else -> i = 0; break
        od
    }
}
