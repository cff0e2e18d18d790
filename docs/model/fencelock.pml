/*
 * The fencelock protocol (protocol.md §4.2-4.7) as a Promela model, checked exhaustively by
 * spin. docs/model/README.md says what is modelled, what is left out and
 * why, and what each variant finds.
 *
 * Properties:
 *   P1  at most one holder within reported validity: at no instant do two
 *       grants both have validity left (valid_left > 0);
 *   P2  fencing tokens strictly increase in grant (hand-out) order, as long
 *       as counters persist.
 * Two runs of this one file check them, each over 3 nodes (quorum 2):
 *   spin -a fencelock.pml           P1: a holder that acquires and then
 *                                   extends (renewals, extends to a shorter
 *                                   or a longer ttl) against a rival that
 *                                   takes free nodes;
 *   spin -DTOKENS -a fencelock.pml  P2 (and P1): two clients that acquire
 *                                   with the full max-plus-raise fencing.
 * Requests are delayed, lost and reordered, replies are lost, nodes
 * restart, clients pause at any point and clocks drift.
 *
 * Why Promela and spin: the TLA+ tools are on no registry this project
 * reaches; spin is one Debian package (`apt-get install spin`) and gcc,
 * which the C tests need anyway, compiles its verifier. The protocol is a
 * few shared variables changed by guarded atomic steps, which is what
 * Promela writes down directly, and spin searches every interleaving of
 * them exhaustively. The stateright crate would have put the model in Rust
 * beside the core, but as Rust code rather than guarded commands, with
 * nothing gained in what can be checked at this size.
 *
 * How to read it. Time passes in ticks, and every clock is kept relative
 * to the present: ticks left (of a key's ttl, of a validity) and ticks
 * since (a request was sent), capped where more makes no difference. So
 * states that differ only in when they happened are one, and the search
 * is finite without bounding time (MAXTIME=n bounds it where asked). Every
 * step is one indivisible transition (a d_step) at an instant. Processes:
 *   clock      moves time forward a tick whatever the clients do: a client
 *              that takes no step while time passes is a paused client;
 *   node(j)    runs any request addressed to it, in any order, whenever it
 *              likes (delay), expires keys, and (variant) restarts empty;
 *   client(c)  the client algorithm of protocol.md §4;
 *   rival      (P1 run) the second client, reduced to what P1 needs of it.
 * The network is one slot per (client, request kind, node). A client
 * decides whenever it likes, with some of the replies that came in (the
 * others were lost); a node that has not answered by then timed out or is
 * pending, and its request is lost or may still land later.
 *
 * Variants (spin -D…; scripts/test-model.sh runs each):
 *   RESTARTS_LOSE_STATE  one node restarts without persistence (key and
 *                        counter gone)                 -> P1 fails; P2 fails
 *   OLD_EXTEND_RULE      validity after extends as before the fix of issue
 *                        item 1                                  -> P1 fails
 *   SPEC_RAISE_RULE      the version 1 raise rule: a raise confirmed by
 *                        any q nodes counts (with -DTOKENS)         -> P2 fails
 *   MARGIN=0             no margin for clock drift                  -> P1 fails
 *   LOWER_AT_DECISION_ONLY  the fixed rule, but an extend's outcome counts
 *                        as unknown only once the client decides, not while
 *                        it is under way                            -> P1 fails
 *   DUPLICATES=n         up to n requests run twice (a resend after an I/O
 *                        error, before issue item 3's fix) -> P1 fails:
 *                        the lease rule needs at-most-once; P2 holds
 *   EXTEND_TTLS          the extends the holder may make: bit 0 renewal,
 *                        bit 1 shorter ttl, bit 2 longer ttl (default all)
 *   MAXTIME, LATE        bounds of the search: ticks of time (default
 *                        none), requests landing after their operation
 *   CHECK_HOLDERS=0      leave P1 out (to see P2 fail on its own)
 */

/* ---------------------------------------------------------------- constants */

#define N        3              /* nodes */
#define Q        2              /* quorum: floor(N/2) + 1 */
#define CLIENTS  2

/* Time is unbounded: every clock is kept relative to now (ticks left,
 * ticks since), so states that differ only in when they happened are one
 * and the search is finite without a time bound. MAXTIME=n (optional)
 * still bounds the ticks, for quick experiments. */

/* Drift. Safety needs only the rate of a client's clock relative to a
 * node's clock, over one ttl. Clients read `now` exactly, and a node keeps a
 * key set (or extended) with ttl t for anything between t - DRIFT and
 * t + DRIFT ticks, chosen afresh for every key and every extend: so every
 * client-node pair drifts on its own. */
#ifndef DRIFT
#define DRIFT    1
#endif
#ifndef MARGIN
#define MARGIN   DRIFT          /* margin(ttl) = ttl * drift + 2 ms, in ticks */
#endif

#define TTL_ACQUIRE 3
#define TTL_SHORT   2           /* a user's extend to a shorter ttl */
#define TTL_LONG    5           /* a user's extend to a longer ttl */

#ifndef EXTEND_TTLS
#define EXTEND_TTLS 7
#endif
#ifdef TOKENS
#define EXTENDS  0              /* P2 run: no extends (README.md says why) */
#else
#define EXTENDS  2              /* P1 run: the holder's extends, one at a time */
#endif

/* The fixed validity rule keeps, per node, what each node surely holds
 * (below). Only extends read it: without them (the P2 run) it is left out,
 * so that states differing only there are one. */
#if EXTENDS > 0 && !defined(OLD_EXTEND_RULE)
#define TRACK_NODES 1
#else
#define TRACK_NODES 0
#endif

/* Requests that outlive their operation: when a client decides, at most
 * LATE requests in all may stay in flight, to land at any later time; the
 * others have landed or are lost. Like MAXTIME this bound keeps the search
 * small. Each known hazard needs two. */
#ifndef LATE
#define LATE     2
#endif

/* Runs `body` for j = 0, 1, 2 (unrolled), and leaves j at 0. */
#define FOR_EACH_NODE(body) j = 0; body; j = 1; body; j = 2; body; j = 0

#define MIN(a, b) ((a) < (b) -> (a) : (b))
#define MAX(a, b) ((a) > (b) -> (a) : (b))
/* The q-th largest of three values, for q = 2: the median. */
#define MEDIAN3(a, b, c) MAX(MAX(MIN(a, b), MIN(a, c)), MIN(b, c))

/* ------------------------------------------------------------------- nodes */

/* One lock key and one fencing counter per node, for the one resource. */
#define NO_KEY 0
byte key_owner[N];              /* the lock token (client + 1), or NO_KEY */
byte key_left[N];               /* ticks until the node must have expired the
                                 * key: its nominal ttl left, plus DRIFT */
byte counter[N];                /* the fencing counter: never expires */

#ifdef MAXTIME
byte ticks;                     /* the ticks so far */
#define TIME_LEFT (ticks < MAXTIME)
#define COUNT_TICK ticks++
#else
#define TIME_LEFT true
#define COUNT_TICK skip
#endif

/* A key set or extended with ttl t now. */
#define SET_TTL(j, t) key_left[j] = (t) + DRIFT
/* The node may expire it from DRIFT ticks before its nominal expiry... */
#define KEY_MAY_EXPIRE(j) (key_owner[j] != NO_KEY && key_left[j] <= 2 * DRIFT)
/* ...and must have by DRIFT ticks after it. */
#define KEY_OVERDUE(j) (key_owner[j] != NO_KEY && key_left[j] == 0)
#define ANY_KEY_OVERDUE (KEY_OVERDUE(0) || KEY_OVERDUE(1) || KEY_OVERDUE(2))

/* ----------------------------------------------------------------- network */

/* The requests a client waits for. It sends each kind at most once per
 * node: one acquire attempt, at most one raise, EXTENDS extends. RELEASE
 * needs no slot (see node()). */
#define ACQUIRE  0
#define RAISE    1
#define EXTEND   2              /* EXTEND + k is the client's k-th extend */
#define KINDS    (2 + EXTENDS)

#define IDLE      0             /* not sent, landed, or lost */
#define IN_FLIGHT 1
#define TWICE     2             /* in flight, and a copy of it will follow */
byte request[CLIENTS * KINDS * N];
#define REQUEST(c, k, j) request[((c) * KINDS + (k)) * N + (j)]
#define IN_FLIGHT_TO_ALL(c, k) \
    ((REQUEST(c, k, 0) != IDLE) + (REQUEST(c, k, 1) != IDLE) + (REQUEST(c, k, 2) != IDLE))

byte late_left = LATE;

/* The reply to one request, if it came in while the client waited. */
#define UNKNOWN 0               /* none: timed out, lost, pending */
#define YES     1               /* acquire granted, extend done, raise done */
#define NO      2               /* acquire: 0 (held); extend: 0 or -1 */
byte answer[CLIENTS * KINDS * N];
#define ANSWER(c, k, j) answer[((c) * KINDS + (k)) * N + (j)]
byte granted_counter[CLIENTS * N];  /* the counter an acquire's YES carried */
#define GRANTED_COUNTER(c, j) granted_counter[(c) * N + (j)]

/* What requests in flight carry. */
#if EXTENDS > 0
byte extend_ttl[CLIENTS * EXTENDS];
#define EXTEND_TTL(c, k) extend_ttl[(c) * EXTENDS + ((k) >= EXTEND -> (k) - EXTEND : 0)]
#else
#define EXTEND_TTL(c, k) 0
#endif
byte fencing_token[CLIENTS];    /* T, which RAISE_FENCE carries */

/* ----------------------------------------------------------------- clients */

#define TRYING   0
#define HELD     1
#define RELEASED 2              /* released, failed or lost: claims nothing */
byte phase[CLIENTS];
byte valid_left[CLIENTS];       /* ticks of validity left: "held" while > 0 */
byte current_ttl[CLIENTS];      /* the ttl renewals use */

#define NOTHING 255
byte waiting_for[CLIENTS];      /* the request kind whose replies it awaits */
byte op_age[CLIENTS];           /* ticks since it sent them (capped at AGE_CAP) */

/* Ages beyond the longest ttl make no difference: every validity counted
 * from such a send time has run out. */
#if EXTENDS > 0
#define AGE_CAP TTL_LONG
#else
#define AGE_CAP TTL_ACQUIRE
#endif
/* Ticks left of a validity counted from a send `age` ticks ago with `ttl`. */
#define LEFT(ttl, age) ((ttl) - MARGIN > (age) -> (ttl) - MARGIN - (age) : 0)

#if TRACK_NODES
/* The fixed validity rule (issue item 1), per client c and node j:
 *   G          ticks for which j surely still holds our key; 0: not surely;
 *   base_age   ticks since j's last confirmed request (acquire or extend)
 *              was sent (0 once G is);
 *   U          the shortest ttl among extends to j whose outcome is unknown
 *              (NO_TTL while there is none). */
#define NO_TTL 255
byte G[CLIENTS * N];
byte base_age[CLIENTS * N];
byte U[CLIENTS * N];
byte pending_G[CLIENTS * N];    /* scratch: G while an extend is under way */
#define AT(a, c, j) a[(c) * N + (j)]
#endif

byte last_token;                /* the token of the latest hand-out (P2) */

#define HOLDS(c) (phase[c] == HELD && valid_left[c] > 0)

/* The client claims nothing from now on: released, lost or failed. */
#define STOP_CLAIMING(c) phase[c] = RELEASED; valid_left[c] = 0

/* P1. Time passing only ends validity, so a second holder can appear only
 * where a client is handed a lock or its validity moves: checked there. */
#ifndef CHECK_HOLDERS
#define CHECK_HOLDERS 1
#endif
#if CHECK_HOLDERS
#define CHECK_ONE_HOLDER assert(!(HOLDS(0) && HOLDS(1)))
#else
#define CHECK_ONE_HOLDER skip
#endif

/* ------------------------------------------------------------------- time */

/* When a lock's validity runs out with no extend under way, the client
 * signals the loss (§4.7) and claims nothing more. */
#define LAPSE(c) \
    if \
    :: phase[c] == HELD && valid_left[c] == 0 && waiting_for[c] == NOTHING -> STOP_CLAIMING(c) \
    :: else \
    fi

#define DOWN(x) if :: (x) > 0 -> x-- :: else fi
#define UP(x) if :: (x) < AGE_CAP -> x++ :: else fi

#if TRACK_NODES
inline tick_lease(c, j)
{
    if
    :: AT(G, c, j) > 0 -> AT(G, c, j)--; UP(AT(base_age, c, j))
    :: else -> AT(base_age, c, j) = 0
    fi
}
#define tick_node_leases(c) tick_lease(c, 0); tick_lease(c, 1); tick_lease(c, 2)
#endif

/* One tick: every time left shrinks, every age grows. */
inline tick()
{
    DOWN(key_left[0]); DOWN(key_left[1]); DOWN(key_left[2]);
    DOWN(valid_left[0]); DOWN(valid_left[1]);
    if :: waiting_for[0] != NOTHING -> UP(op_age[0]) :: else fi;
    if :: waiting_for[1] != NOTHING -> UP(op_age[1]) :: else fi;
#if TRACK_NODES
    tick_node_leases(0); tick_node_leases(1)
#endif
}

proctype clock()
{
    /* A node expires a key at most DRIFT ticks after its nominal expiry:
     * time waits for that. */
end:
    do
    :: d_step { TIME_LEFT && !ANY_KEY_OVERDUE -> COUNT_TICK; tick(); LAPSE(0); LAPSE(1) }
    od
}

/* ------------------------------------------------------------------ nodes */

/* A request no longer in flight and no longer awaited: forget what it
 * carried, so that states differing only there are one. */
inline retire(c, k)
{
    if
    :: waiting_for[c] != k && IN_FLIGHT_TO_ALL(c, k) == 0 ->
        if
#if EXTENDS > 0
        :: k >= EXTEND -> EXTEND_TTL(c, k) = 0
#endif
        :: k == RAISE && phase[c] != TRYING -> fencing_token[c] = 0
        :: else
        fi
    :: else
    fi
}

/* The reply is there for the client if it still waits (it may yet be lost:
 * see DECIDE). */
inline reply(c, k, j, outcome)
{
    if
    :: waiting_for[c] == k -> ANSWER(c, k, j) = outcome
    :: else
    fi
}

/* The scripts of protocol.md §3 as node j runs them for client c, whose
 * lock token is c + 1 (a fresh token per attempt). */
inline run_acquire(c, j)                 /* SET NX PX, then INCR */
{
    if
    :: key_owner[j] == NO_KEY ->
        key_owner[j] = c + 1;
        SET_TTL(j, TTL_ACQUIRE);
#ifdef TOKENS
        counter[j]++;
#endif
        reply(c, ACQUIRE, j, YES);
        if
        :: waiting_for[c] == ACQUIRE -> GRANTED_COUNTER(c, j) = counter[j]
        :: else
        fi
    :: else -> reply(c, ACQUIRE, j, NO)  /* 0: held */
    fi
}

inline run_extend(c, k, j)               /* compare-and-pexpire */
{
    if
    :: key_owner[j] == c + 1 ->
        SET_TTL(j, EXTEND_TTL(c, k));
        reply(c, k, j, YES)
    :: else -> reply(c, k, j, NO)        /* 0 or -1; never re-creates */
    fi
}

inline run_raise(c, j)                   /* counter = max(counter, T) */
{
    counter[j] = MAX(counter[j], fencing_token[c]);
    reply(c, RAISE, j, YES)
}

inline execute(c, k, j)
{
    REQUEST(c, k, j) = (REQUEST(c, k, j) == TWICE -> IN_FLIGHT : IDLE);
    if
    :: k == ACQUIRE -> run_acquire(c, j)
    :: k == RAISE   -> run_raise(c, j)
    :: k >= EXTEND  -> run_extend(c, k, j)
    fi;
    retire(c, k)
}

#ifdef DUPLICATES
/* A request may have been sent again on a fresh connection after an I/O
 * error (the behaviour before issue item 3's fix), and so run twice: while
 * it is in flight, it may gain a copy that runs after it. The copy is in
 * flight as the request was, so it may land late or be lost like any. */
byte duplicates_left = DUPLICATES;
#define DUPLICATE(c, k, j) \
    :: d_step { duplicates_left > 0 && REQUEST(c, k, j) == IN_FLIGHT -> \
                duplicates_left--; REQUEST(c, k, j) = TWICE }
#else
#define DUPLICATE(c, k, j)
#endif

/* Node j runs a request in flight to it: any client's, any kind, in any
 * order, at any time. */
#define DELIVER(c, k, j) \
    :: d_step { REQUEST(c, k, j) != IDLE -> execute(c, k, j) } \
    DUPLICATE(c, k, j)
#if EXTENDS > 0
#define DELIVER_ALL_OF(c, j) \
    DELIVER(c, ACQUIRE, j) DELIVER(c, RAISE, j) DELIVER(c, EXTEND, j) DELIVER(c, EXTEND + 1, j)
#else
#define DELIVER_ALL_OF(c, j) DELIVER(c, ACQUIRE, j) DELIVER(c, RAISE, j)
#endif

#ifdef RESTARTS_LOSE_STATE
bool restarted;                 /* one restart without persistence in all */
#endif

inline delete_key(j)
{
    key_owner[j] = NO_KEY; key_left[j] = 0
}

proctype node(byte j)
{
end:
    do
    DELIVER_ALL_OF(0, j)
#ifdef TOKENS
    DELIVER_ALL_OF(1, j)
#endif
    :: d_step {
        /* The key's ttl ran out, by this node's clock. */
        KEY_MAY_EXPIRE(j) -> delete_key(j)
    }
    :: d_step {
        /* A RELEASE (compare-and-delete) lands. A client sends it to every
         * node once it claims nothing: after a release, a loss, or a failed
         * attempt (the undo of §4.2). It deletes only that client's own key,
         * so all it can do is free the node at some moment from then on; or
         * it is lost and the key expires. */
        key_owner[j] != NO_KEY && phase[key_owner[j] - 1] == RELEASED -> delete_key(j)
    }
#ifdef RESTARTS_LOSE_STATE
    :: d_step {
        /* A restart without persistence: key and counter are gone. (With
         * AOF always a restart keeps both, and a key's expiry is an instant,
         * not a duration; all it does is drop what is in flight, which is
         * loss here. It needs no step of its own.) */
        !restarted -> restarted = true; delete_key(j); counter[j] = 0
    }
#endif
    od
}

/* ---------------------------------------------------------------- clients */

/* Sends request kind k to every node in parallel, then awaits replies. */
inline send_to_all(c, k)
{
    waiting_for[c] = k;
    /* A raise keeps the acquire's send time: validity counts from there
     * (§4.2 step 5: the time the raise takes counts). */
    if
    :: k != RAISE -> op_age[c] = 0
    :: else
    fi;
    FOR_EACH_NODE( REQUEST(c, k, j) = IN_FLIGHT )
}

/* Which requests may land after their operation. In the P1 run only the
 * extends: an ACQUIRE landing late only puts its owner's key where nobody
 * else's was, which the owner never counts on and which to the other
 * client looks like a node taken; a late raise only moves a counter. */
#ifdef TOKENS
#define MAY_BE_LATE(c) true
#else
#define MAY_BE_LATE(c) (waiting_for[c] >= EXTEND)
#endif

/* The client decides whenever it likes, with the replies that came in.
 * Before it decides, for each node in turn, one of:
 *   a reply that came in may have been lost (the request ran, the client
 *   never hears it);
 *   a request still in flight either is lost, or stays in flight, to land
 *   at any later time (at most late_left such requests in all).
 * Each choice is enabled only where it changes something, so each outcome
 * is reached one way only; `kept` counts the requests left in flight. */
inline lose_or_keep(c)
{
    FOR_EACH_NODE(
        if
        :: ANSWER(c, waiting_for[c], j) != UNKNOWN -> ANSWER(c, waiting_for[c], j) = UNKNOWN
        :: skip
        fi;
        if
        :: REQUEST(c, waiting_for[c], j) != IDLE -> REQUEST(c, waiting_for[c], j) = IDLE
        :: REQUEST(c, waiting_for[c], j) != IDLE && kept < late_left && MAY_BE_LATE(c) -> kept++
        :: else
        fi
    )
}

/* Decides, while `awaiting` holds, in every way the network allows: one
 * indivisible step. */
#define DECISIONS(c, awaiting, decision) \
    :: atomic { \
        awaiting -> \
        lose_or_keep(c); \
        d_step { kept = 0; decision } \
    }

/* The decision is taken: stop listening, forget the replies. */
inline stop_waiting(c)
{
    kind = waiting_for[c];
    late_left = late_left - IN_FLIGHT_TO_ALL(c, kind);
    FOR_EACH_NODE( ANSWER(c, kind, j) = UNKNOWN );
    waiting_for[c] = NOTHING;
    retire(c, kind);
    kind = 0
}

/* A failed attempt. Its undo (§4.2) sends RELEASE to every node that did
 * not reply 0, as the ACQUIRE may still land anywhere else. */
inline undo(c)
{
    STOP_CLAIMING(c);
    stop_waiting(c);
    FOR_EACH_NODE( GRANTED_COUNTER(c, j) = 0; ANSWER(c, ACQUIRE, j) = UNKNOWN );
    retire(c, RAISE);
    op_age[c] = 0
}

/* §4.2 steps 5 and 6: hand the lock out, unless its validity ran out. */
inline hand_out_or_undo(c)
{
    if
    :: op_age[c] < TTL_ACQUIRE - MARGIN ->
#ifdef TOKENS
        assert(fencing_token[c] > last_token);  /* P2 */
        last_token = fencing_token[c];
#endif
        phase[c] = HELD;
        valid_left[c] = LEFT(TTL_ACQUIRE, op_age[c]);
        current_ttl[c] = TTL_ACQUIRE;
#if TRACK_NODES
        FOR_EACH_NODE(
            if
            :: ANSWER(c, ACQUIRE, j) == YES ->
                AT(G, c, j) = valid_left[c]; AT(base_age, c, j) = op_age[c]
            :: else
            fi;
            AT(U, c, j) = NO_TTL
        );
#endif
        stop_waiting(c);
        FOR_EACH_NODE( GRANTED_COUNTER(c, j) = 0; ANSWER(c, ACQUIRE, j) = UNKNOWN );
        retire(c, RAISE);
        op_age[c] = 0;
        CHECK_ONE_HOLDER
    :: else -> undo(c)
    fi
}

/* §4.4: the token T is the largest counter among the grants heard. */
inline count_grants(c, grants, at_token)
{
    grants = 0; at_token = 0; fencing_token[c] = 0;
    FOR_EACH_NODE(
        if
        :: ANSWER(c, ACQUIRE, j) == YES ->
            grants++;
            fencing_token[c] = MAX(fencing_token[c], GRANTED_COUNTER(c, j))
        :: else
        fi
    );
    FOR_EACH_NODE(
        if
        :: ANSWER(c, ACQUIRE, j) == YES && GRANTED_COUNTER(c, j) == fencing_token[c] -> at_token++
        :: else
        fi
    )
}

/* Whether node j vouches for T after the raise.
 * The rule checked by default: j granted, and its counter is now >= T
 * because it reported T or confirmed the raise. Our key sat on j from our
 * INCR until after the hand-out, so any later INCR there comes after the
 * counter reached T.
 * SPEC_RAISE_RULE (the version 1 raise rule): j confirmed the raise, granting
 * or not. On a node that did not grant, another client's INCR may have come
 * before our raise. */
#ifdef SPEC_RAISE_RULE
#define VOUCHES(c, j) (ANSWER(c, RAISE, j) == YES)
#else
#define VOUCHES(c, j) (ANSWER(c, ACQUIRE, j) == YES && \
                       (GRANTED_COUNTER(c, j) == fencing_token[c] || ANSWER(c, RAISE, j) == YES))
#endif

inline count_vouching(c, vouching)
{
    vouching = 0;
    FOR_EACH_NODE(
        if
        :: VOUCHES(c, j) -> vouching++
        :: else
        fi
    )
}

/* After an extend (a renewal or a user's) with `ttl`, sent at op_sent[c],
 * while the lock was still valid: the new validity, the ttl of later
 * renewals, and whether the lock is lost. */
inline settle_held_extend(c, ttl, confirmed, refused)
{
    confirmed = 0; refused = 0;
    FOR_EACH_NODE(
        if
        :: ANSWER(c, waiting_for[c], j) == YES -> confirmed++
        :: ANSWER(c, waiting_for[c], j) == NO -> refused++
        :: else
        fi
    );
#ifdef OLD_EXTEND_RULE
    /* Before the fix: with a quorum of confirmations V counts from this
     * extend; otherwise V stays, whatever its requests may still do. */
    if
    :: confirmed >= Q -> valid_left[c] = LEFT(ttl, op_age[c])
    :: else
    fi;
#else
    /* The fixed rule: V is the q-th largest G_j. A request that lands on j
     * after j's last confirmed one lands no earlier than that one was sent,
     * and leaves the key at least its own ttl from then. So j surely keeps
     * the key until base_sent + min(base ttl, U_j) - margin; G_j already
     * holds the first term. */
    FOR_EACH_NODE(
        if
        :: ANSWER(c, waiting_for[c], j) == YES ->
            AT(G, c, j) = LEFT(MIN(ttl, AT(U, c, j)), op_age[c]);
            AT(base_age, c, j) = (AT(G, c, j) > 0 -> op_age[c] : 0)
        :: ANSWER(c, waiting_for[c], j) == NO ->
            AT(G, c, j) = 0; AT(base_age, c, j) = 0
        :: else ->
            AT(U, c, j) = MIN(AT(U, c, j), ttl);
            if
            :: AT(G, c, j) > 0 ->
                AT(G, c, j) = MIN(AT(G, c, j), LEFT(AT(U, c, j), AT(base_age, c, j)))
            :: else
            fi
        fi
    );
    FOR_EACH_NODE( if :: AT(G, c, j) == 0 -> AT(base_age, c, j) = 0 :: else fi );
    valid_left[c] = MEDIAN3(AT(G, c, 0), AT(G, c, 1), AT(G, c, 2));
#endif
    if
    :: confirmed >= Q -> current_ttl[c] = ttl  /* later renewals use it */
    :: else
    fi;
    if
    :: refused > N - Q -> STOP_CLAIMING(c)     /* definitely lost (§4.5) */
    :: else
    fi;
    stop_waiting(c);
    op_age[c] = 0;
    CHECK_ONE_HOLDER
}

inline settle_extend(c, ttl, confirmed, refused)
{
    if
    :: valid_left[c] == 0 ->
        /* The validity ran out while the extend was under way: the lock was
         * lost then (§4.7), and a lost lock stays lost. */
        STOP_CLAIMING(c);
        stop_waiting(c);
        op_age[c] = 0
    :: else -> settle_held_extend(c, ttl, confirmed, refused)
    fi
}

/* A client that will not claim the lock again needs none of this. */
inline forget_lock(c)
{
#if TRACK_NODES
    FOR_EACH_NODE( AT(G, c, j) = 0; AT(base_age, c, j) = 0; AT(U, c, j) = 0 );
#endif
    current_ttl[c] = 0
}

/* §4.2 step 3, §4.4: after the ACQUIREs. */
inline decide_acquire(c)
{
    count_grants(c, grants, at_token);
    if
    :: grants < Q -> undo(c)
    :: grants >= Q && at_token >= Q -> hand_out_or_undo(c)
    :: grants >= Q && at_token < Q ->
        /* Raise the counters to T before handing out. The ACQUIREs not
         * answered yet stay in flight, and no reply of theirs is heard. */
        late_left = late_left - IN_FLIGHT_TO_ALL(c, ACQUIRE);
        send_to_all(c, RAISE)
    fi;
    grants = 0; at_token = 0
}

inline decide_raise(c)
{
    count_vouching(c, grants);
    if
    :: grants >= Q -> hand_out_or_undo(c)
    :: else -> undo(c)
    fi;
    grants = 0
}

inline decide_extend(c)
{
    settle_extend(c, ttl, grants, at_token);
    extends++; ttl = 0; grants = 0; at_token = 0
}

/* One extend, sent to every node while the lock is held. */
inline send_extend(c, new_ttl)
{
    ttl = new_ttl;
    EXTEND_TTL(c, EXTEND + extends) = ttl;
    send_to_all(c, EXTEND + extends);
#if !defined(OLD_EXTEND_RULE) && !defined(LOWER_AT_DECISION_ONLY)
    /* Its outcome is unknown from the moment it is sent: a shorter ttl may
     * land at once, long before the client hears anything. So while it is
     * under way, every node counts as if it had timed out. */
    FOR_EACH_NODE(
        if
        :: AT(G, c, j) > 0 ->
            AT(pending_G, c, j) = MIN(AT(G, c, j), LEFT(MIN(AT(U, c, j), ttl), AT(base_age, c, j)))
        :: else -> AT(pending_G, c, j) = 0
        fi
    );
    valid_left[c] = MEDIAN3(AT(pending_G, c, 0), AT(pending_G, c, 1), AT(pending_G, c, 2));
    FOR_EACH_NODE( AT(pending_G, c, j) = 0 )
#endif
}
#define MAY_EXTEND(c) (waiting_for[c] == NOTHING && HOLDS(c) && extends < EXTENDS)

proctype client(byte c)
{
    byte j, kind, grants, at_token, extends, ttl, kept;

    /* §4.2: one attempt with a fresh token, to every node in parallel. */
    d_step { send_to_all(c, ACQUIRE) }

    /* Then, one step at a time: decide the attempt; decide the raise
     * (§4.4); while held, extends one at a time, each a renewal with the
     * current ttl or a user's extend to another ttl (§4.5, §4.7); or
     * release (§4.6: stop claiming, then send RELEASE everywhere). Or do
     * nothing more: a client that takes no further step is one paused
     * until the end. */
    do
    DECISIONS(c, waiting_for[c] == ACQUIRE, decide_acquire(c))
    DECISIONS(c, waiting_for[c] == RAISE, decide_raise(c))
#if EXTENDS > 0
    DECISIONS(c, waiting_for[c] >= EXTEND && waiting_for[c] != NOTHING, decide_extend(c))
    :: d_step { (EXTEND_TTLS & 1) && MAY_EXTEND(c) -> send_extend(c, current_ttl[c]) }
    :: d_step { (EXTEND_TTLS & 2) && MAY_EXTEND(c) -> send_extend(c, TTL_SHORT) }
    :: d_step { (EXTEND_TTLS & 4) && MAY_EXTEND(c) -> send_extend(c, TTL_LONG) }
#endif
    :: d_step { waiting_for[c] == NOTHING && phase[c] == HELD -> STOP_CLAIMING(c) }
    :: d_step { waiting_for[c] == NOTHING && phase[c] == RELEASED -> forget_lock(c); extends = 0 };
       break
    od
}

#ifndef TOKENS
/* The P1 run's second client, reduced to what P1 needs of it. Its acquire
 * lands on two free nodes and is handed out at once, valid for
 * ttl - margin from then. That covers every acquire of a full client: its
 * ACQUIREs found those nodes free when they landed and kept them until the
 * hand-out, and the holder's steps meanwhile (extends, late requests) see
 * the node taken either way. It acts only once the holder's attempt is
 * decided: a rival handed its lock first, with a holder acquiring after
 * it, is two clients without extends, which the -DTOKENS run checks. */
#define TAKE(a, b) \
    :: d_step { phase[0] != TRYING && key_owner[a] == NO_KEY && key_owner[b] == NO_KEY -> \
                key_owner[a] = 2; SET_TTL(a, TTL_ACQUIRE); \
                key_owner[b] = 2; SET_TTL(b, TTL_ACQUIRE); \
                phase[1] = HELD; valid_left[1] = LEFT(TTL_ACQUIRE, 0); \
                CHECK_ONE_HOLDER }

proctype rival()
{
end:
    if
    TAKE(0, 1)
    TAKE(0, 2)
    TAKE(1, 2)
    fi
}
#endif

init
{
    atomic {
#ifdef TOKENS
        /* Counters start apart, as earlier attempts that reached only some
         * nodes leave them. The nodes are interchangeable and only the
         * differences between counters matter, so these six stand for all
         * starts whose counters differ by at most 2. */
        if
        :: counter[0] = 0; counter[1] = 0
        :: counter[0] = 1; counter[1] = 0
        :: counter[0] = 1; counter[1] = 1
        :: counter[0] = 2; counter[1] = 0
        :: counter[0] = 2; counter[1] = 1
        :: counter[0] = 2; counter[1] = 2
        fi;
#endif
        waiting_for[0] = NOTHING; waiting_for[1] = NOTHING;
        run clock();
        run node(0); run node(1); run node(2);
        run client(0);
#ifdef TOKENS
        run client(1)
#else
        run rival()
#endif
    }
}
