/*
 * slot.pml: a Promela model of timerwheel's slot protocol, as implemented
 * in src/slots.c and src/wheel.c, with the record state word of
 * src/records.c and src/service.c where it races the drain.
 *
 * Modelled (each step's comment names the C function it stands for):
 *   - the slot: counter word closed | count (tw_slot.word), round number
 *     (tw_slot.seq) and the round's epoch (tw_slot.epoch): reserve by CAS
 *     in the producer's epoch or an older round (tw__slot_reserve),
 *     refusal as NEWER (the round is for a later epoch: re-read the cursor)
 *     or CLOSED (the drain is in progress: go to a late slot, place_late /
 *     tw__slot_reserve_any);
 *   - publish by CAS from EMPTY(k <= round) (tw__slot_publish); a
 *     tombstoned (or otherwise refused) publish places the timer again;
 *   - the drain: close (fetch_or closed, slot_close), exchange every
 *     reserved entry with EMPTY(next round) = the tombstone
 *     (drain_reserved), reopen for the slot's next epoch; the two late
 *     slots (tw__slot_drain_late), drained every step;
 *   - compaction (-DCOMPACT; tw__wheel_maintain, compact_one,
 *     tw__slot_compact, keep_entry): between steps, a slot not due at the
 *     next tick is closed and emptied like a drain and reopened for the
 *     SAME epoch; its live entries are placed again, stale ones dropped;
 *   - placement tags (tw_record.seq, tw__tag): every entry carries the
 *     record's placement sequence at the time it was written; a reschedule
 *     that places bumps it before its release; the drain (and compaction)
 *     drop an entry whose tag is not current and re-place a current one
 *     with its own tag;
 *   - positions beyond slot_capacity and the overflow segment that holds
 *     them: a producer makes sure the slot has one before its reserve CAS
 *     (ensure_room: load the pointer, or install a fresh, zeroed segment,
 *     entries EMPTY(0), by CAS from NULL) and publishes into the segment it
 *     loaded there (the entry pointer tw__slot_reserve returns), never
 *     re-reading the pointer; at every reopen (drain, compaction, late
 *     slot) the drainer, the slot closed and its entries taken, detaches
 *     the segment (tw__slot_detach: exchange the pointer with NULL). The
 *     detached memory keeps its contents, and a stale producer may still
 *     CAS an entry of it (its publish fails on the tombstone: it places
 *     again); a producer that read the word before a close may install a
 *     fresh segment after the detach (its CAS then fails: it looks again);
 *   - the give-back of a slot's segments at the trim (tw__slot_give_back,
 *     give_back_strays in wheel.c, strays): between steps, whenever the
 *     drainer likes, NGIVEBACK times, on a wheel or late slot: a look at
 *     the word (count 0?) and at the segment pointer, the close (fetch_or),
 *     the detach if the count the close returned is 0, and the store of
 *     the word exactly as the close found it (same round, open); a producer
 *     whose reserve CAS succeeds on the restored word reserves position 0;
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
 *     drainer after its step;
 *   - deferred placement (-DDEFER; src/defer.c): an arming whose tick is
 *     past the margin (here k > cur + 1, TW_DEFER_AHEAD in C) may append
 *     its entry to its producer's log instead of placing it (or place it
 *     itself: a full log), in a step of its own after its look at cur, as
 *     in C; the drainer, before each step, looks at each logged entry
 *     (entry_current: PENDING, tag current) and drops it or places it
 *     (tw__defer_drain), or, while its tick is more than two margins
 *     away and past the coming step, leaves it in the log for a later
 *     drain (TW_DEFER_KEEP). Cancels and reschedules race the log as they
 *     race the slots. A log entry counts as an entry for properties 5 and 7.
 * How it steps: see "how the model steps" below (one atomic step per
 * access to shared state).
 * Not modelled: occupancy bits and sleeping (they only decide when the
 * cursor steps, never what a step does), periodic timers, record reuse
 * (each timer has its own record: the generation tag is checked by the C
 * unit and fuzz tests), tw_stop, memory orders (Spin interleaves; the
 * orders are TSan's job in the stress tests), the 31-bit round numbers of
 * the word and the 2^30-round stall check (rounds are small numbers here),
 * when compaction runs (here: whenever the drainer likes, NCOMPACT times),
 * which slots the give-back looks at (stray_mark's marks, the summary
 * word, the trim period, tw__wheel_trim_due: here any slot, whenever the
 * drainer likes, NGIVEBACK times),
 * the grace period that frees detached segments (here they stay, contents
 * and all, for ever: what it guarantees), the overflow table and segments
 * j >= 2 (one overflow segment per slot here: every segment is made,
 * loaded and detached alike), running out of memory, and the bound on
 * detached memory waiting (here: NDETACH detaches per run, then drains
 * keep the segments, as the C code's do while too much memory waits, or
 * within the budget; a give-back's detach counts among the NDETACH);
 * with -DDEFER, the pokes that wake the cursor for a logged timer (the
 * occupancy bits' pairing; tests/test_defer.c), the logs' bound for
 * tw_next_due, their ring indexes (one entry per producer here) and the
 * drain's early claims (tw__wheel_claim_early drains the logs at each of
 * its looks for earlier work).
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
 *   7. no copies: when a step begins, every settled timer has exactly one
 *      entry carrying its current tag (issue 12: a timer moved earlier and
 *      later grew an entry per round trip);
 *   8. no deadlock: every process ends (pan's invalid end state check);
 *      and, in the non-progress run, the model has no cycle at all, so no
 *      reserve, publish or CAS loop can retry forever (lock-freedom).
 *   9. segments: a reserve CAS that succeeds at an overflow position was
 *      preceded by the load of the slot's current segment; a drain finds
 *      the segment of every position it takes; a publish that succeeds at
 *      an overflow position writes the slot's current segment, never a
 *      detached one (asserts in reserve_cas, take_one, publish).
 *  10. (-DDEFER) the margin: an entry logged with no stall between its
 *      producer's look at cur and its append is in the wheel before a
 *      step reaches its tick (asserted when each step begins).
 * Every rare path (RARE(n) below) is reachable: run.sh compiles the model
 * with -DREACH=n for each and requires the assertion to be hit.
 *
 * Broken variants (each must give a counterexample):
 *   -DBROKEN_NO_TOMBSTONE  the drain takes published values but leaves
 *                          reserved, unpublished entries alone, so a late
 *                          publish succeeds into the reopened slot and
 *                          waits there a whole rotation (property 5 fails
 *                          first; 4 or 6 follow);
 *   -DBROKEN_DEFER_NO_MARGIN  (with -DDEFER) a timer due at the next tick
 *                          may be logged: appended after the drain that
 *                          precedes that tick's step, it is not in the
 *                          wheel when the step comes (property 10);
 *   -DBROKEN_DEFER_KEEP_DUE  (with -DDEFER) a drain leaves an entry in
 *                          its log whatever its tick: one due by the step
 *                          misses it (property 10);
 *   -DBROKEN_DEFER_COUNT_LATE  (with -DDEFER) the append writes its
 *                          chunk's count after the tail that publishes
 *                          the entry: a drain in between reads the chunk
 *                          as cleared and passes a live timer's entry
 *                          unread (property 5: the timer has no entry);
 *   -DBROKEN_NO_VERSION    releasing a lease does not bump the version, so
 *                          the drain's claim CAS succeeds on a deadline it
 *                          read before a reschedule moved it (property 2);
 *   -DBROKEN_NO_TAG        the drain ignores tags and re-places every entry
 *                          of a pending timer with its current tag, as
 *                          before issue 12: a timer moved earlier keeps a
 *                          copy (property 7);
 *   -DBROKEN_REDERIVE_SEGMENT  the publish at an overflow position derives
 *                          the entry pointer again from the slot's CURRENT
 *                          segment (installing one if NULL) instead of the
 *                          one loaded before the reserve: a producer
 *                          delayed across a drain misses the tombstone in
 *                          the detached segment and publishes into the
 *                          fresh segment of a later round, at a position
 *                          that round may never reserve: the timer waits a
 *                          rotation or is lost (property 5, or 4 or 6);
 *   -DBROKEN_GIVE_BACK_ANY the give-back detaches the segments whatever
 *                          count its close returned: a producer that
 *                          reserved an overflow position publishes into
 *                          the detached segment (property 9), or the
 *                          drain finds no segment for it.
 *
 * Sizes: -DLEVELS=1|2 (2 slots per level), -DCAP=1|2, -DNPROD=2|3
 * (producer 0: schedule, then reschedule / cancel / nothing; producer 1:
 * schedule, then cancel producer 0's timer / reschedule / cancel its own;
 * producer 2: schedule), -DNO_SECOND (schedule only), -DMAXT (ticks
 * stepped while producers run; then one jump over every deadline), -DDMAX
 * (largest delay, ticks), -DJUMP (the drainer may step two ticks at once),
 * -DNDETACH (detaches per run, default 1), -DNGIVEBACK (give-backs that
 * close a slot, per run, default 1; 0: none; a look that finds nothing to
 * give back changes nothing, and is not counted, but with
 * -DGIVEBACK_COUNT_LOOKS, for the non-progress run, where it would be a
 * cycle), -DRESERVE_ONE_STEP (the reserve
 * at an overflow position, three steps otherwise: load of the word,
 * ensure_room, CAS, is one step, as below slot_capacity: this loses only
 * the reserves that made room and then lost their CAS to a close, such as
 * a stale install after a detach; it keeps the large searches feasible,
 * and run.sh checks the three steps in smaller ones).
 *
 * Commands (stress/model/run.sh runs these and more; -DCOLLAPSE keeps the
 * search exhaustive in less memory):
 *   spin -DMAXT=1 -DDMAX=2 -DRESERVE_ONE_STEP -a slot.pml
 *   gcc -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=3072 -o pan pan.c
 *   ./pan -m200000                     # "errors: 0", 40.0M states, ~80 s, 2.6 GB
 *   spin -DMAXT=1 -DDMAX=1 -DGIVEBACK_COUNT_LOOKS -a slot.pml
 *   gcc -O2 -DNP -DCOLLAPSE -DMEMLIM=8192 -o pan pan.c
 *   ./pan -l -m200000                  # no non-progress cycle: "errors: 0"
 *                                      # (63.8M states, ~220 s, 4 GB)
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
#ifndef NCOMPACT
#define NCOMPACT 1          /* compactions a run may make (-DCOMPACT) */
#endif
#ifndef NDETACH
#define NDETACH  1          /* detaches in a run (then drains keep the
                               segments, as the C code's do while too much
                               detached memory waits for its grace period) */
#endif
#ifndef NGIVEBACK
#define NGIVEBACK 1         /* give-backs a run may make (0: none) */
#endif
#define NT     NPROD        /* timers: producer p owns timer p */
#define KEEP_NONE 255       /* keep_entry: drop it (no tick is this large) */
#define MAXPOS (CAP + 3)    /* positions per slot: CAP, then overflow */
#define OVF    (MAXPOS - CAP) /* positions in the overflow segment */
#define NLATE  2
#define LATE0  (LEVELS * S)
#define NSL    (LEVELS * S + NLATE)
#define NTAKE  (NSL * MAXPOS) /* entries a step may take */
#define NENT   (NSL * MAXPOS + NDETACH * OVF)
/* the entry of position pos of slot si: in the fixed array (pos < CAP),
 * else in overflow segment g: g = 0 is the slot's first (beside its fixed
 * array), g >= 1 the one made after the g-th detach of the run */
#define EIX(si, g, pos) \
    ((pos) < CAP || (g) == 0 -> (si) * MAXPOS + (pos) : \
                                NSL * MAXPOS + ((g) - 1) * OVF + (pos) - CAP)
#define KMAX   (MAXT + DMAX) /* no deadline beyond this tick */

/* ---- the slot counter word: closed (8) | count (0..7) -------------------
 * (the round number and epoch are arrays of their own: sseq, sepoch) */

#define W_COUNT(w)  ((w) & 7)
#define W_CLOSED    8

/* ---- entries: EMPTY(k) = round k (< 256), VALUE = 256 + tag * 8 + timer - */

#define VALUE       256
#define IS_VALUE(v) ((v) >= VALUE)
#define V_TIMER(v)  (((v) - VALUE) & 7)
#define V_TAG(v)    (((v) - VALUE) >> 3)
#define MKVAL(i, tag) (VALUE + (tag) * 8 + (i))

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
#define R_ROOM   4          /* (the model's) overflow position: ensure_room next */
#define R_CAS    5          /* (the model's) overflow position: the CAS next */

/* ---- shared state ------------------------------------------------------- */

byte cur;                   /* tw_wheel.cur */
byte word[NSL];             /* tw_slot.word; LATE0.. are the late slots */
byte sseq[NSL];             /* tw_slot.seq: the round number */
byte sepoch[NSL];           /* tw_slot.epoch (wheel slots) */
short ent[NENT];            /* slot entries: per slot its fixed array and
                               first overflow segment, then one overflow
                               segment per detach (EIX) */
byte sgen[NSL];             /* the overflow segment pointer (tw_slot.near[j]):
                               the segment it points to, or, when NULL, the
                               fresh one ensure_room will install */
bit  sseg[NSL];             /* the overflow segment pointer is not NULL */
byte ndetach;               /* detaches so far */
short rst[NT];              /* tw_record.state */
byte dl[NT];                /* tw_record.deadline, in ticks */
byte rseq[NT];              /* tw_record.seq: the placement tag */

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
byte ncompact;              /* compactions so far (-DCOMPACT) */
byte ngive;                 /* give-backs so far (NGIVEBACK) */
#ifdef DEFER
/* deferred placement (defer.c): producer i's log holds timer i's entry */
short logv[NT];             /* tw_defer_entry.entry (0: none) */
byte logk[NT];              /* tw_defer_entry.tick */
bit  inlog[NT];             /* ghost: the entry waits in the log */
bit  logfresh[NT];          /* ghost: appended with cur as its producer read
                               it (no stall between its look and its append) */
bit  loglive[NT];           /* tw_defer_log.live: the count of the entry's
                               chunk (here a chunk of one entry) */
#endif

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
#define R_OVERFLOW        7   /* a publish at an overflow position */
#define R_COMPACTED       8   /* compaction placed a live entry again */
#define R_STALE_DROPPED   9   /* a drain dropped a superseded entry */
#define R_DETACHED_PUBLISH 10 /* a publish into a detached segment failed */
#define R_GAVE_BACK       11  /* a give-back detached a slot's segment */
#define R_LOG_PLACED      13  /* -DDEFER: the drain of a log placed an entry */
#define R_LOG_DROPPED     14  /* -DDEFER: the drain of a log dropped a stale one */
#define R_LOG_KEPT        15  /* -DDEFER: a drain left a far entry in its log */
#define R_LOG_PASSED      16  /* -DDEFER: a drain passed a chunk its owner cleared */
#define R_GIVE_BACK_KEPT  12  /* a give-back's close found a reservation made
                                 after its look: the word went back as it was */

/* ---- how the model steps ----------------------------------------------------
 *
 * Every atomic block below is one access to shared state (with the local
 * computation around it), so Spin interleaves the processes exactly at the
 * C code's atomic operations. A C retry loop of the form "load the word,
 * compute the new value from it alone, CAS, on failure retry" is one atomic
 * step here: its successful CAS (or the load that made it give up) is its
 * only effect, so nothing is lost by taking it in one go. Where the C code
 * reads another word between its load and its CAS (take_entry reads the
 * deadline; the reserve at an overflow position loads, or installs, the
 * segment pointer), the steps are separate. Local variables are reset once
 * dead, so that they do not multiply the states.
 */

/* examine slot psi with its word read into pw: closed, a round for a later
 * epoch than ours, or try */
#define EXAMINE() \
    if \
    :: (pw & W_CLOSED) -> prc = R_CLOSED \
    :: !(pw & W_CLOSED) && sepoch[psi] > pe -> prc = R_NEWER \
    :: !(pw & W_CLOSED) && sepoch[psi] <= pe -> prc = R_OK \
    fi

#define RESET_PLACE \
    pl = 0; pe = 0; psi = 0; pround = 0; pw = 0; prc = 0; pj = 0; pg = 0; pq = 0

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
    psi = pl * S + ((pe >> (pl * BITS)) & (S - 1))
}

/* tw__slot_publish (slots.c): CAS the entry from EMPTY(k <= round) to our
 * VALUE and leave the placement loop; a tombstone (EMPTY of a later round)
 * or a VALUE refuses it, and place_once / place_late answer "place again":
 * back to aim. (A refused publish writes nothing and stays refused, so
 * taking the re-read of cur in the same step loses no interleaving.)
 * `epoch` is the round's (the checker's property 4), `tag` the entry's.
 * An overflow position (pos >= CAP) is published through the entry pointer
 * the reservation returned: into segment g, the one ensure_room loaded
 * before the reserve CAS, detached since or not (the grace period keeps
 * detached memory alive; a drain tombstoned every reserved entry of it
 * before the detach, so such a publish fails). */
inline publish(si, pos, round, epoch, g, i, tag, k, own)
{
    atomic {
        if
        :: (pos) >= CAP ->
            RARE(R_OVERFLOW);                   /* stats.overflowed */
#ifdef BROKEN_REDERIVE_SEGMENT
            /* BROKEN: the entry pointer is derived again now, from the
             * slot's CURRENT segment (made afresh if the pointer is NULL,
             * as ensure_room would), not the one loaded before the reserve */
            if
            :: !sseg[si] -> sseg[si] = 1
            :: else -> skip
            fi;
            g = sgen[si];
#endif
            skip
        :: else -> skip
        fi;
        if
        :: !IS_VALUE(ent[EIX(si, g, pos)]) && ent[EIX(si, g, pos)] <= (round) ->
            /* the segment it published into is still the slot's (property 9) */
            assert((pos) < CAP || ((g) == sgen[si] && sseg[si]));
            pube[EIX(si, g, pos)] = (epoch);
            ent[EIX(si, g, pos)] = MKVAL(i, tag);
            nent[i]++;
            if
            :: (own) == 1 -> busy[i] = 0    /* the arming call's placement is done */
#ifdef DEFER
            :: (own) == 2 -> inlog[i] = 0   /* the cursor placed a logged entry */
#endif
            :: else -> skip
            fi;
            RESET_PLACE;
            break                           /* placed */
        :: else ->
            RARE(R_TOMBSTONED);                 /* TW_RARE_TOMBSTONED */
            if
            :: (pos) >= CAP && (g) != sgen[si] ->
                RARE(R_DETACHED_PUBLISH)        /* its segment was detached */
            :: else -> skip
            fi;
            RESET_PLACE;
            aim(k)
        fi
    }
}

/* ensure_room (slots.c), at an overflow position of slot si, between the
 * reserve's load of the word and its CAS: load the segment pointer
 * (acquire); if NULL, install a fresh, zeroed segment (entries EMPTY(0)) by
 * CAS from NULL (a lost CAS returns the winner's: the same). One step: the
 * load decides nothing but the CAS. The segment seen (pg) is the one the
 * publish will write into. */
inline ensure_room(si)
{
    atomic {
        if
        :: !sseg[si] -> sseg[si] = 1        /* segment sgen[si]: never used */
        :: else -> skip
        fi;
        pg = sgen[si];
        prc = R_CAS
    }
}

/* tw__slot_reserve / reserve_any (slots.c), the CAS after ensure_room at an
 * overflow position: it succeeds only if the word is still the one
 * examined (the C word carries the round number: here the word and sseq),
 * so no close, and no detach, came in between: the segment loaded is the
 * slot's current one. Else the word changed: back to the look at it
 * (`again`; the C code looks at the word its failed CAS returned: the same
 * thing, one step earlier). */
inline reserve_cas(si, wheel, again)
{
    atomic {
        if
        :: word[si] == pw && sseq[si] == pq ->
            assert(W_COUNT(pw) < MAXPOS);
            assert(sseg[si] && sgen[si] == pg);
            word[si] = pw + 1;
            pround = sseq[si];              /* the round the CAS vouches for */
            if
            :: wheel -> pe = sepoch[si]     /* ours, or an older round's */
            :: else -> skip
            fi;
            prc = R_OK
        :: else ->                          /* the word changed: look again */
            pw = 0; pg = 0;
            prc = again
        fi;
        pq = 0
    }
}

/* The reserve at an overflow position: ensure_room comes between the load
 * of the word (pw, and pq: the round) and the CAS, three steps (with
 * -DRESERVE_ONE_STEP, one: what that loses is only a reserve that made
 * room and then lost its CAS to a close, e.g. a fresh segment installed
 * after a detach by a producer that read the word before the close). */
#ifdef RESERVE_ONE_STEP
#define ROOM_THEN_CAS(si, wheel, again) \
    pq = sseq[si]; ensure_room(si); reserve_cas(si, wheel, again)
#else
#define ROOM_THEN_CAS(si, wheel, again) \
    pq = sseq[si]; prc = R_ROOM
#endif

/* place_late (wheel.c) + tw__slot_reserve_any (slots.c): reserve in
 * whichever late slot is open (one is: the drain closes them in turn),
 * publish for its round. Entered with prc = R_CLOSED. */
inline place_late(i, tag, k, own)
{
    do
    :: atomic {                             /* reserve_any: load, CAS count + 1 */
        prc == R_CLOSED ->
        pw = word[LATE0 + pj];
        if
        :: (pw & W_CLOSED) -> pj = 1 - pj   /* being drained: the other one */
        :: !(pw & W_CLOSED) && W_COUNT(pw) < CAP ->
            word[LATE0 + pj] = pw + 1;
            pround = sseq[LATE0 + pj];
            prc = R_OK
        :: !(pw & W_CLOSED) && W_COUNT(pw) >= CAP ->
            ROOM_THEN_CAS(LATE0 + pj, false, R_CLOSED)
        fi;
        if
        :: prc == R_OK -> break
        :: else -> skip
        fi
       }
    :: atomic { prc == R_ROOM -> ensure_room(LATE0 + pj) }  /* ensure_room */
    :: atomic {
        prc == R_CAS ->
        reserve_cas(LATE0 + pj, false, R_CLOSED);   /* reserve_any: the CAS */
        if
        :: prc == R_OK -> break
        :: else -> skip
        fi
       }
    od;
    publish(LATE0 + pj, W_COUNT(pw), pround, 0, pg, i, tag, k, own)
}

/* tw__place / place_once (wheel.c) after aim(k): reserve, publish; again
 * until published. (A NEWER refusal writes nothing and stays a refusal,
 * so the re-read of cur is taken in the same step.) Below CAP, the load of
 * the word and the CAS are one step (ensure_room's segment there, the
 * fixed array, is never detached); at an overflow position, ensure_room
 * comes between them. Entered with prc = R_RETRY. */
inline place_aimed(i, tag, k, own)
{
    do
    :: atomic {                             /* tw__slot_reserve: load, CAS count + 1 */
        prc == R_RETRY ->
        pw = word[psi];
        EXAMINE();
        if
        :: prc == R_OK && W_COUNT(pw) < CAP ->
            word[psi] = pw + 1;
            pround = sseq[psi];             /* the round the CAS vouches for */
            pe = sepoch[psi]                /* ours, or an older round's */
        :: prc == R_OK && W_COUNT(pw) >= CAP ->
            ROOM_THEN_CAS(psi, true, R_RETRY)
        :: prc == R_NEWER ->
            RARE(R_NEWER_SEEN);                 /* TW_RARE_NEWER: re-read cur */
            RESET_PLACE;
            aim(k)
        :: prc == R_CLOSED ->
            RARE(R_LATE_SLOT);                  /* TW_RARE_LATE_SLOT */
            pj = 0
        fi
       }
    :: atomic { prc == R_ROOM -> ensure_room(psi) }     /* ensure_room */
    :: atomic {                             /* tw__slot_reserve: CAS count + 1 */
        prc == R_CAS -> reserve_cas(psi, true, R_RETRY)
       }
    :: prc == R_CLOSED -> place_late(i, tag, k, own)
    :: atomic {                             /* tw__slot_publish */
        prc == R_OK -> publish(psi, W_COUNT(pw), pround, pe, pg, i, tag, k, own)
       }
    od
}

/* tw__place: aim, then reserve and publish */
inline place(i, tag, k, own)
{
    atomic { aim(k) }
    place_aimed(i, tag, k, own)
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

/* the drain's exchange of entry dp of slot si with EMPTY(the next round,
 * nexte) (acq_rel): a VALUE is taken, an EMPTY (reserved, not published)
 * becomes the tombstone that makes the late publish fail. An overflow
 * position's entry is in the slot's current segment (tw__slot_entry): the
 * drainer is its only detacher, and every position < dn was reserved with
 * that segment in place (ensure_room before the CAS), so it is not NULL. */
inline take_one(si, nexte, E, islate)
{
    atomic {
        dp < dn ->
        assert(dp < CAP || sseg[si]);       /* the segment is there */
        dv = ent[EIX(si, sgen[si], dp)];
#ifdef BROKEN_NO_TOMBSTONE
        if
        :: IS_VALUE(dv) -> ent[EIX(si, sgen[si], dp)] = (nexte)
        :: else -> skip             /* BROKEN: the reservation keeps its EMPTY */
        fi;
#else
        ent[EIX(si, sgen[si], dp)] = (nexte);
#endif
        if
        :: IS_VALUE(dv) ->
            nent[V_TIMER(dv)]--;
            /* property 4: taken in the epoch it was published for */
            assert(islate || pube[EIX(si, sgen[si], dp)] == (E));
            pube[EIX(si, sgen[si], dp)] = 0;
            taken[ntk] = dv;
            ntk++
        :: else -> skip
        fi;
        dv = 0;
        dp++
    }
}

/* tw__slot_detach (slots.c), after the takes and before tw__slot_reopen,
 * the slot closed: exchange the overflow segment pointer with NULL. The
 * memory goes to the grace period (not modelled: it keeps its contents,
 * and stale producers may still CAS its entries: every reserved one is a
 * tombstone now). The next producer at an overflow position installs a
 * fresh segment (ensure_room). After NDETACH detaches in the run, drains
 * keep the segments (as the C code's do while too much detached memory
 * waits). In the reopen's step: both are the drainer's stores, and a
 * producer could tell the NULL before the reopen from the NULL after it
 * only by installing a fresh segment in between, which its CAS (on a word
 * the close changed) fails to use either way. */
inline detach(si)
{
    if
    :: sseg[si] && ndetach < NDETACH ->
        sseg[si] = 0;
        ndetach++;
        sgen[si] = ndetach              /* what a producer installs next */
    :: else -> skip                 /* NULL already, or the bound */
    fi
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

/* The checker's count of the published entries of timer g carrying its
 * current tag, into gn. */
inline count_current(g)
{
    gn = 0;
    gp = 0;
    do
    :: gp < NENT ->
        if
        :: IS_VALUE(ent[gp]) && V_TIMER(ent[gp]) == (g) && V_TAG(ent[gp]) == rseq[g] -> gn++
        :: else -> skip
        fi;
        gp++
    :: else -> gp = 0; break
    od;
#ifdef DEFER
    if
    :: inlog[g] && IS_VALUE(logv[g]) && V_TAG(logv[g]) == rseq[g] -> gn++
    :: else -> skip
    fi
#endif
}

/* tw__wheel_step (wheel.c), first part: publish cur = T (release); the
 * checker's snapshot for properties 5 and 7. */
inline step_begin()
{
    sc = cur;
    cur = T;
    gi = 0;
    do
    :: gi < NT ->
        snap[gi] = (ST(rst[gi]) == PENDING && !(rst[gi] & LEASE) && !busy[gi]);
#ifdef DEFER
        /* an entry its producer appended after a stall (it read cur before
         * a step that has passed) may miss this step: placed by the next
         * drain, late as a placement stalled as long (defer.c, top) */
        snap[gi] = snap[gi] && !(inlog[gi] && !logfresh[gi]);
#endif
        /* every armed, settled timer has exactly one current entry: none is
         * lost (property 5), none is copied (property 7) */
        count_current(gi);
        assert(!snap[gi] || gn == 1);
#ifdef DEFER
        /* property 10: an entry logged without a stall is in the wheel
         * before a step reaches its tick (TW_DEFER_AHEAD's margin) */
        assert(!(inlog[gi] && logfresh[gi] && logk[gi] <= T));
#endif
        gn = 0;
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
        assert(sepoch[dsi] == dE);  /* the round open is the epoch collected */
        dn = W_COUNT(word[dsi]);    /* slot_close */
        word[dsi] = word[dsi] | W_CLOSED;
        dp = 0
       }
       do
       :: take_one(dsi, sseq[dsi] + 1, dE, false)
       :: atomic {
           dp >= dn ->
           detach(dsi);             /* tw__slot_detach */
           sepoch[dsi] = dnext;     /* reopen: epoch, round, then the word */
           sseq[dsi]++;
           word[dsi] = 0;
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
        dn = W_COUNT(word[LATE0 + j]);
        word[LATE0 + j] = word[LATE0 + j] | W_CLOSED;     /* slot_close */
        dp = 0
    }
    do
    :: take_one(LATE0 + j, sseq[LATE0 + j] + 1, 0, true)
    :: atomic {
        dp >= dn ->
        detach(LATE0 + j);                   /* tw__slot_detach */
        if
        :: dn > 0 -> sseq[LATE0 + j]++       /* next round */
        :: else -> skip                      /* nobody came: same round */
        fi;
        word[LATE0 + j] = 0;
        dn = 0; dp = 0;
        break
       }
    od
}

/* take_entry (wheel.c): drop a dead or superseded entry (its tag is not
 * the record's: the seq load, relaxed, right after the state load), keep
 * an entry (tag and all) at T + 1 when a reschedule holds the lease,
 * re-place one not yet due with its own tag, claim a due timer (PENDING ->
 * FIRING). Starts with the load of the state (acquire), in step_rest. */
#ifdef BROKEN_NO_TAG
#define SUPERSEDED(tag) false
#define RETAG(tag) rseq[ti]
#else
#define SUPERSEDED(tag) ((tag) != rseq[ti])
#define RETAG(tag) (tag)
#endif
inline take_entry(tag)
{
    do
    :: atomic { ST(tst) != PENDING -> break }      /* cancelled, claimed, ... */
    :: atomic {
        ST(tst) == PENDING && SUPERSEDED(tag) ->
        RARE(R_STALE_DROPPED);                     /* superseded: dropped */
        break
       }
    :: atomic { ST(tst) == PENDING && !SUPERSEDED(tag) && (tst & LEASE) -> tdd = 1 }
        RARE(R_LEASE_MET);          /* TW_RARE_LEASE_MET */
        place(ti, RETAG(tag), T + 1, false);
        break
    :: atomic { ST(tst) == PENDING && !SUPERSEDED(tag) && !(tst & LEASE) ->
        tdd = dl[ti] }              /* load the deadline (relaxed) */
        if
        :: tdd > T ->
            place(ti, RETAG(tag), tdd, false);     /* cascade / pushed later */
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

/* keep_entry (wheel.c), for an entry compaction took out of a slot whose
 * round collects for epoch ce: drop it if dead or superseded; while a
 * lease is held, put it back at ce; else place it at its deadline. Never
 * claims (that is the steps' job). */
inline keep_entry(tag, ce)
{
    atomic {
        if
        :: ST(tst) != PENDING || SUPERSEDED(tag) -> tdd = KEEP_NONE
        :: ST(tst) == PENDING && !SUPERSEDED(tag) && (tst & LEASE) -> tdd = ce
        :: ST(tst) == PENDING && !SUPERSEDED(tag) && !(tst & LEASE) -> tdd = dl[ti]
        fi
    }
    if
    :: tdd != KEEP_NONE ->
        RARE(R_COMPACTED);
        place(ti, RETAG(tag), tdd, false)
    :: else -> skip
    fi;
    tdd = 0
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
        ti = V_TIMER(taken[sk]);
        ttag = V_TAG(taken[sk]);
        taken[sk] = 0;
        sk++;
        tst = rst[ti]               /* take_entry: load the state (acquire) */
       }
       take_entry(ttag);
       atomic { ti = 0; tst = 0; tdd = 0; ttag = 0 }
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

/* compact_one + tw__slot_compact (wheel.c, slots.c): a slot whose round
 * is not due at the next tick is closed, emptied like a drain (the
 * tombstones carry the next round) and reopened for the same epoch; then
 * every live entry it held is placed again (keep_entry). */
inline compact()
{
    atomic {
        ncompact < NCOMPACT ->
        ncompact++;
        select (dsi : 0 .. LEVELS * S - 1);
        if
        :: sepoch[dsi] > cur + 1 && W_COUNT(word[dsi]) > 0 ->
            dE = sepoch[dsi];
            dn = W_COUNT(word[dsi]);        /* slot_close */
            word[dsi] = word[dsi] | W_CLOSED;
            dp = 0
        :: else -> dsi = NSL                /* nothing to do there */
        fi
    }
    if
    :: dsi < NSL ->
        do
        :: take_one(dsi, sseq[dsi] + 1, dE, false)
        :: atomic {
            dp >= dn ->
            detach(dsi);            /* tw__slot_detach */
            sseq[dsi]++;            /* reopen: same epoch, next round */
            word[dsi] = 0;
            dn = 0; dp = 0;
            break
           }
        od;
        do
        :: atomic {
            sk < ntk ->
            ti = V_TIMER(taken[sk]);
            ttag = V_TAG(taken[sk]);
            taken[sk] = 0;
            sk++;
            tst = rst[ti]           /* keep_entry: load the state (acquire) */
           }
           keep_entry(ttag, dE);
           atomic { ti = 0; tst = 0; ttag = 0 }
        :: atomic { sk >= ntk -> sk = 0; ntk = 0; break }
        od
    :: else -> skip
    fi;
    dsi = 0; dE = 0
}

/* tw__slot_give_back (slots.c), from give_back_strays (wheel.c, strays;
 * at the trim, between steps): here whenever the drainer likes, NGIVEBACK
 * times, on any slot (a wheel slot or a late one: the marks, stray_mark,
 * only decide which slots it looks at). The look at the word (relaxed:
 * count 0, else its drain gives the segments back), the look at the
 * segment pointer (holds_overflow), the close (fetch_or, acq_rel); if the
 * count it returned is 0, tw__slot_detach (its own look at the pointer and
 * the exchange with NULL: one step, since only the drainer makes the
 * pointer NULL); then the store of the word exactly as the close found it
 * (release): the same round, open. A producer's CAS on the restored word
 * (the one it read before the close, or after) reserves position 0 (count
 * 0): the reserve below CAP is one step here, as the CAS decides alone.
 * A look that finds nothing to give back leaves the state as it was: only
 * the close counts against NGIVEBACK (-DGIVEBACK_COUNT_LOOKS: the looks
 * too, for the non-progress run). The detach takes one of the run's
 * NDETACH (C: tw__seg_may_retire; refused, the slot is marked again). */
inline give_back()
{
    do                                      /* dp: the step next */
    :: atomic {
        dp == 0 && ngive < NGIVEBACK ->
#ifdef GIVEBACK_COUNT_LOOKS
        ngive++;                            /* (the non-progress run) */
#endif
        select (dsi : 0 .. NSL - 1);
        if                                  /* the first look (relaxed) */
        :: W_COUNT(word[dsi]) == 0 -> dp = 1
        :: else -> dsi = 0; break           /* entries: its drain gives back */
        fi
       }
    :: atomic {
        dp == 1 ->                          /* holds_overflow (relaxed) */
        if
        :: sseg[dsi] -> dp = 2
        :: else -> dp = 0; dsi = 0; break   /* nothing to give back */
        fi
       }
    :: atomic {
        dp == 2 ->                          /* the close (fetch_or, acq_rel) */
#ifndef GIVEBACK_COUNT_LOOKS
        ngive++;
#endif
        dn = word[dsi];
        word[dsi] = word[dsi] | W_CLOSED;
        dp = 3
       }
    :: atomic {
        dp == 3 ->
#ifdef BROKEN_GIVE_BACK_ANY
        /* BROKEN: detaches whatever count the close returned */
        RARE(R_GAVE_BACK);
        detach(dsi);
#else
        if
        :: W_COUNT(dn) == 0 ->
            RARE(R_GAVE_BACK);
            detach(dsi)                     /* tw__slot_detach */
        :: else -> RARE(R_GIVE_BACK_KEPT)   /* reserved since the look */
        fi;
#endif
        dp = 4
       }
    :: atomic {
        dp == 4 ->                          /* the word as it was (release) */
        word[dsi] = dn;
        dn = 0; dp = 0; dsi = 0;
        break
       }
    od
}

#ifdef DEFER
/* tw__defer_drain (defer.c), at the top of the cursor's loop, before it
 * steps to T_: for each log, load the entry (acquire of the tail), look at
 * the record (entry_current: PENDING and the entry's tag current), drop it
 * or place it (tw__place), then advance the head. Or leave it in the log
 * (the newest TW_DEFER_KEEP entries of a log whose bound is more than
 * 2 TW_DEFER_AHEAD ticks away: here, one tick of margin, k > cur + 2; and
 * never one due by the step that follows, which C drains whole first). */
inline drain_logs(T_)
{
    gi = 0;
    do
    :: gi < NT ->
        atomic {
            ti = gi;
            if
#ifdef BROKEN_DEFER_KEEP_DUE
            :: inlog[ti] ->
#else
            :: inlog[ti] && logk[ti] > cur + 2 && logk[ti] > T_ ->
#endif
                RARE(R_LOG_KEPT);
                ti = NT
            :: inlog[ti] && !loglive[ti] ->
                /* chunks (defer.c): a count of 0, read after the tail,
                 * passes the entry unread */
                RARE(R_LOG_PASSED);
                inlog[ti] = 0;
                logv[ti] = 0;
                ti = NT
            :: inlog[ti] && loglive[ti] && IS_VALUE(logv[ti]) && ST(rst[ti]) == PENDING &&
               V_TAG(logv[ti]) == rseq[ti] ->
                RARE(R_LOG_PLACED);
                ttag = V_TAG(logv[ti]);
                tdd = logk[ti]
            :: inlog[ti] && loglive[ti] && !(IS_VALUE(logv[ti]) && ST(rst[ti]) == PENDING &&
                              V_TAG(logv[ti]) == rseq[ti]) ->
                RARE(R_LOG_DROPPED);        /* stale, or cleared by its cancel */
                inlog[ti] = 0;              /* stale: dropped, never placed */
                logv[ti] = 0;
                ti = NT
            :: !inlog[ti] -> ti = NT
            fi
        }
        if
        :: ti < NT -> place(ti, ttag, tdd, 2); atomic { logv[ti] = 0 }
        :: else -> skip
        fi;
        atomic { ti = 0; ttag = 0; tdd = 0; gi++ }
    :: else -> gi = 0; break
    od
}
#endif

#define PLACE_LOCALS \
    byte pl, pe, psi, pround, pw, prc, pj, pg, pq

proctype drainer()
{
    PLACE_LOCALS;
    byte T, sc, gi, sk, gn, gp;
    byte dmask, dord, dsi, dl_, dn, dp, dE, dnext;
    short dv;
    short taken[NTAKE];             /* the entries taken in this step */
    byte ntk;
    byte due[NT];                   /* timer + 1 per claimed timer */
    byte ndue;
    byte ti, ttag;
    short tst;
    byte tdd;

    do
#ifdef DEFER
    :: cur < MAXT -> drain_logs(cur + 1);
       atomic { T = cur + 1; step_begin() }
       step_rest()
#else
    :: atomic { cur < MAXT -> T = cur + 1; step_begin() }
       step_rest()
#endif
#ifdef COMPACT
    :: compact()
#endif
#if NGIVEBACK > 0
    :: give_back()
#endif
#ifdef JUMP
    :: atomic { cur + 1 < MAXT -> T = cur + 2; step_begin() }
       step_rest()
#endif
    :: atomic { cur >= MAXT -> break }
    od;
    /* the harness: once the producers are done, one step over every
     * remaining deadline (a tw_advance jump) */
#ifdef DEFER
    ndone == NPROD;
    drain_logs(KMAX);
    atomic { T = KMAX; step_begin() }
#else
    atomic { ndone == NPROD -> T = KMAX; step_begin() }
#endif
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
        rtag = rseq[i];                 /* schedule_commit: the entry's tag */
#ifdef DEFER
        /* tw__defer_place: a timer due after the margin may be logged (or
         * placed: a full log, a thread without one) */
        if
#ifdef BROKEN_DEFER_NO_MARGIN
        :: k > cur -> rlog = true; rcur = cur
#else
        :: k > cur + 1 -> rlog = true; rcur = cur
#endif
        :: true -> aim(k)
        fi
#else
        aim(k)
#endif
    }
#ifdef DEFER
    if
    :: rlog ->
        atomic {                        /* the append: entry, count, then the tail (release) */
            logv[i] = MKVAL(i, rtag);
            logk[i] = k;
#ifndef BROKEN_DEFER_COUNT_LATE
            loglive[i] = 1;
#endif
            inlog[i] = 1;
            logfresh[i] = (cur == rcur);
#ifndef BROKEN_DEFER_COUNT_LATE
            busy[i] = 0;                /* the call returns: the cursor places it */
#endif
            rlog = false;
            rcur = 0
        }
#ifdef BROKEN_DEFER_COUNT_LATE
        /* the chunk's count written after the tail that publishes the entry */
        atomic { loglive[i] = 1; busy[i] = 0 }
#endif
    :: else -> place_aimed(i, rtag, k, true)
    fi;
#else
    place_aimed(i, rtag, k, true);
#endif
    rtag = 0
}

#ifdef DEFER
/* tw__defer_forget (internal.h): the owner of the log, after its
 * cancel's CAS took the timer from PENDING to FREE (rfreed), may clear the
 * entry it logged for it (while TW_LEAN_FORGETS is up: either way here),
 * so that the drain passes it by without a look at the record, and takes
 * it from its chunk's count. The index is checked: only an entry of this
 * timer is cleared. */
inline forget(i)
{
    if
    :: rfreed ->
        atomic {
            if
            :: IS_VALUE(logv[i]) && V_TIMER(logv[i]) == (i) -> logv[i] = 0; loglive[i] = 0
            :: true -> skip             /* TW_LEAN_FORGETS down */
            fi;
            rfreed = false
        }
    :: else -> skip
    fi
}
#define OWN_CANCEL(i) cancel(i); forget(i)
#define FREED_BY_CANCEL rfreed = true
#else
#define OWN_CANCEL(i) cancel(i)
#define FREED_BY_CANCEL skip
#endif

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
            if
            :: ST(rst[i]) == PENDING -> FREED_BY_CANCEL  /* tw_cancel's common path */
            :: else -> skip
            fi;
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
        if                              /* tw__lease_publish: a new tag first */
        :: rplace -> atomic { rtag = rseq[i] + 1; rseq[i] = rtag }
        :: else -> skip
        fi;
        atomic {                        /* tw__lease_publish: release */
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
        :: rplace -> place(i, rtag, k, true)
        :: else -> skip
        fi
    :: else -> skip
    fi;
    atomic { k = 0; rtook = false; rplace = false; rtag = 0 }
}

proctype producer(byte me)
{
    PLACE_LOCALS;
    byte k, rtag;
    bool rtook, rplace;
#ifdef DEFER
    bool rlog, rfreed;
    byte rcur;
#endif

    schedule(me);
#ifndef NO_SECOND

    if
    :: me == 0 ->
        if
        :: true -> reschedule(0)
        :: true -> OWN_CANCEL(0)
        :: true -> skip
        fi
    :: me == 1 ->
        if
        :: true -> cancel(0)        /* another thread's timer: races its reschedule */
        :: true -> reschedule(1)
        :: true -> OWN_CANCEL(1)
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
                sepoch[l * S + i] = e;
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
