-- fencelock's PostgreSQL store (docs/postgres-store.md): the wire protocol's
-- scripts (docs/protocol.md §3, core/src/scripts.rs), ported line by line to
-- PL/pgSQL over a small Redis-subset key model, so one protocol describes both
-- stores and the core's quorum, lock and watchdog logic stays unchanged.
--
-- __SCHEMA__ is a placeholder: the core replaces it with a quoted identifier
-- (default "fencelock") before running this file. The file is idempotent
-- (CREATE ... IF NOT EXISTS, CREATE OR REPLACE): send it as one statement
-- list, so it runs in one transaction, and migrations started together
-- (clients starting at once) take turns on an advisory lock.
--
-- Every function runs with `SET search_path = __SCHEMA__, pg_temp` (so no
-- object of another schema, and no temporary object, can stand in for ours)
-- and none is SECURITY DEFINER: a caller uses its own privileges.
--
-- Atomicity. A Redis script runs alone. Here every script first takes a
-- transaction-level advisory lock per hash tag of its KEYS (Redis Cluster's
-- rule: the text between the first `{` and the next `}`; every key of a
-- script shares one), so scripts on one lock, semaphore or read-write lock
-- run one at a time, and scripts on different ones in parallel. Call them in
-- READ COMMITTED (PostgreSQL's default): each statement inside then sees what
-- the script before it committed. Writing primitives take the same lock, so
-- each is atomic on its own too.
--
-- Time. The server's clock decides expiry (clock_timestamp()). As in Redis,
-- whose scripts see one frozen time for expiry, a script reads the clock once,
-- after taking its locks, and every primitive it calls uses that instant (the
-- transaction-local setting fencelock.script_clock, set on entry and cleared on
-- exit; an error rolls it back with the transaction). Outside a script each
-- call reads the clock. (A SET clause on the functions would scope it more
-- simply, but PostgreSQL lets only superusers put a custom setting there.)
--
-- Layout: script(name, keys, args) is every script's atomic entry point: it
-- checks the arguments, locks, freezes the clock and runs lua_<name>, the
-- line-by-line port of the Lua.

DO $migrate$
BEGIN
  -- One migration at a time (held until this transaction ends).
  PERFORM pg_advisory_xact_lock(hashtextextended('fencelock migration', 0));
  -- Only when missing: CREATE SCHEMA checks CREATE on the database even with
  -- IF NOT EXISTS, and a migrating role may have CREATE on the schema only.
  IF to_regnamespace($name$__SCHEMA__$name$) IS NULL THEN
    CREATE SCHEMA IF NOT EXISTS __SCHEMA__;
  END IF;
END
$migrate$;

-- ---------------------------------------------------------------------------
-- The key model
-- ---------------------------------------------------------------------------

-- One row per key. A key is live iff its row exists and (expires_at IS NULL
-- OR expires_at > the clock); an expired key behaves as absent everywhere and
-- its row (with its members) is deleted when a command touches it.
CREATE TABLE IF NOT EXISTS __SCHEMA__.keys (
  key        text COLLATE "C" PRIMARY KEY,
  kind       text NOT NULL CHECK (kind IN ('string', 'zset', 'set', 'hash')),
  value      text,               -- a string's value; NULL for the other kinds
  expires_at timestamptz,        -- NULL: no expiry
  CHECK ((kind = 'string') = (value IS NOT NULL))
);

-- Sorted sets: ordered by score, then member bytes (COLLATE "C"), as Redis does.
CREATE TABLE IF NOT EXISTS __SCHEMA__.zset_members (
  key    text COLLATE "C" NOT NULL REFERENCES __SCHEMA__.keys (key) ON DELETE CASCADE,
  member text COLLATE "C" NOT NULL,
  score  double precision NOT NULL CHECK (score <> 'NaN'),
  PRIMARY KEY (key, member)
);
CREATE INDEX IF NOT EXISTS zset_members_by_score ON __SCHEMA__.zset_members (key, score, member);

CREATE TABLE IF NOT EXISTS __SCHEMA__.set_members (
  key    text COLLATE "C" NOT NULL REFERENCES __SCHEMA__.keys (key) ON DELETE CASCADE,
  member text COLLATE "C" NOT NULL,
  PRIMARY KEY (key, member)
);

CREATE TABLE IF NOT EXISTS __SCHEMA__.hash_fields (
  key   text COLLATE "C" NOT NULL REFERENCES __SCHEMA__.keys (key) ON DELETE CASCADE,
  field text COLLATE "C" NOT NULL,
  value text NOT NULL,
  PRIMARY KEY (key, field)
);

-- The protocol version these functions speak (docs/protocol.md §8).
CREATE OR REPLACE FUNCTION __SCHEMA__.schema_version() RETURNS integer
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$ BEGIN RETURN 4; END $$;

-- ---------------------------------------------------------------------------
-- Internals: errors, parsing as Redis and Lua do, the clock, locks
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION __SCHEMA__.wrongtype() RETURNS void
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  RAISE EXCEPTION 'WRONGTYPE Operation against a key holding the wrong kind of value'
    USING ERRCODE = 'wrong_object_type';
END
$$;

-- A Redis integer argument (string2ll): an optional minus, no leading zeros,
-- no spaces, within 64 bits; otherwise Redis's error.
CREATE OR REPLACE FUNCTION __SCHEMA__.redis_int(s text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF s IS NULL OR s !~ '^(0|-?[1-9][0-9]{0,18})$'
     OR (length(s) >= 19 AND s::numeric NOT BETWEEN -9223372036854775808 AND 9223372036854775807) THEN
    RAISE EXCEPTION 'ERR value is not an integer or out of range'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN s::bigint;
END
$$;

-- A Redis score argument (strtod, whole string, no leading space, no NaN):
-- decimals with an optional exponent, and inf / +inf / -inf / infinity.
-- NULL when it is not one (each command raises its own message).
CREATE OR REPLACE FUNCTION __SCHEMA__.redis_float(s text) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF s ~ '^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$' THEN
    RETURN s::double precision;
  ELSIF s ~* '^\+?inf(inity)?$' THEN
    RETURN 'Infinity'::double precision;
  ELSIF s ~* '^-inf(inity)?$' THEN
    RETURN '-Infinity'::double precision;
  END IF;
  RETURN NULL;
END
$$;

-- A score as Redis replies with it (ZSCORE, ZRANGE WITHSCORES): the shortest
-- text that reads back as the same double; integers without exponent.
CREATE OR REPLACE FUNCTION __SCHEMA__.score_text(x double precision) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
SET extra_float_digits = 1
AS $$
BEGIN
  IF x IS NULL THEN RETURN NULL; END IF;
  IF x = 'Infinity' THEN RETURN 'inf'; END IF;
  IF x = '-Infinity' THEN RETURN '-inf'; END IF;
  IF x = trunc(x) AND abs(x) < 9007199254740992 THEN RETURN x::bigint::text; END IF;
  RETURN x::text;
END
$$;

-- Lua 5.1's tonumber(s) (luaO_str2d: strtod or a hexadecimal integer, spaces
-- around allowed): a double, or NULL (Lua nil) when s is no number.
CREATE OR REPLACE FUNCTION __SCHEMA__.tonumber(s text) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  t text := btrim(s, E' \t\n\r\f\v');
BEGIN
  IF t ~ '^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$' THEN
    RETURN t::double precision;
  ELSIF t ~ '^[+-]?0[xX][0-9a-fA-F]{1,15}$' THEN
    RETURN (CASE WHEN left(t, 1) = '-' THEN -1 ELSE 1 END)
      * ('x' || lpad(substring(t FROM '[0-9a-fA-F]+$'), 16, '0'))::bit(64)::bigint;
  ELSIF t ~* '^[+-]?(inf|infinity|nan)$' THEN
    RETURN (CASE WHEN left(t, 1) = '-' THEN -1 ELSE 1 END)
      * (CASE WHEN t ~* 'nan' THEN 'NaN' ELSE 'Infinity' END)::double precision;
  END IF;
  RETURN NULL;
END
$$;

-- A string in Lua arithmetic (`now + ARGV[5]`): coerced as tonumber does, or
-- Lua's error.
CREATE OR REPLACE FUNCTION __SCHEMA__.arith(s text) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  n double precision := tonumber(s);
BEGIN
  IF n IS NULL THEN
    RAISE EXCEPTION 'ERR attempt to perform arithmetic on a % value',
      CASE WHEN s IS NULL THEN 'nil' ELSE 'string' END
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN n;
END
$$;

-- Lua's math.max(a, b): unlike greatest(), nil is an error, not skipped.
CREATE OR REPLACE FUNCTION __SCHEMA__.math_max(a double precision, b double precision)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF a IS NULL OR b IS NULL THEN
    RAISE EXCEPTION 'ERR bad argument to ''max'' (number expected, got nil)'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN greatest(a, b);
END
$$;

-- A Lua number given to redis.call as an argument becomes a string by
-- lua_tostring, that is "%.14g" (integers below 1e14 in full).
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_tostring(x double precision) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
SET extra_float_digits = -1
AS $$
BEGIN
  IF x IS NULL THEN RETURN NULL; END IF;
  IF x = 'Infinity' THEN RETURN 'inf'; END IF;
  IF x = '-Infinity' THEN RETURN '-inf'; END IF;
  IF x = 'NaN' THEN RETURN 'nan'; END IF;
  IF x = trunc(x) AND abs(x) < 1e14 THEN RETURN x::bigint::text; END IF;
  RETURN x::text;  -- extra_float_digits = -1: "%.14g"
END
$$;

-- string.format('%d', x) in Redis's Lua 5.1: the number cast to a C long.
CREATE OR REPLACE FUNCTION __SCHEMA__.fmt_d(x double precision) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF x IS NULL THEN
    RAISE EXCEPTION 'ERR bad argument to ''format'' (number expected, got nil)'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN trunc(x)::bigint::text;
END
$$;

-- A Lua number returned by a script becomes an integer reply by a C cast to
-- long long, which truncates (and so does any INCR result above 2^53, which
-- went through a double on its way).
-- (The small helpers are PL/pgSQL, not SQL: with a SET clause an SQL
-- function is planned again at every call.)
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_integer(x double precision) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$ BEGIN RETURN trunc(x)::bigint; END $$;

-- Redis Cluster's hash tag of a key: the text between the first `{` and the
-- next `}` when not empty, else the whole key.
CREATE OR REPLACE FUNCTION __SCHEMA__.hash_tag(k text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  open integer := strpos(k, '{');
  len integer;
BEGIN
  IF open > 0 THEN
    len := strpos(substr(k, open + 1), '}') - 1;
    IF len > 0 THEN
      RETURN substr(k, open + 1, len);
    END IF;
  END IF;
  RETURN k;
END
$$;

-- The advisory lock (64-bit form) that serializes the scripts and writes on
-- the keys of one hash tag: hashtextextended(tag, 1785).
CREATE OR REPLACE FUNCTION __SCHEMA__.tag_lock_id(k text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$ BEGIN RETURN hashtextextended(hash_tag(k), 1785); END $$;

-- Taken by every primitive that writes, so each is atomic on its own. Inside
-- a script (the clock is frozen) the script holds its tags' locks already.
CREATE OR REPLACE FUNCTION __SCHEMA__.lock_key(k text) RETURNS void
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF current_setting('fencelock.script_clock', true) <> '' THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock(tag_lock_id(k));
END
$$;

-- The server's clock in microseconds since the Unix epoch: frozen inside a
-- script (see the top of this file), else clock_timestamp().
CREATE OR REPLACE FUNCTION __SCHEMA__.clock_us() RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  frozen text := current_setting('fencelock.script_clock', true);
BEGIN
  IF frozen IS NOT NULL AND frozen <> '' THEN
    RETURN frozen::bigint;
  END IF;
  RETURN (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
END
$$;

CREATE OR REPLACE FUNCTION __SCHEMA__.us_timestamp(us bigint) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$ BEGIN RETURN timestamptz 'epoch' + us * interval '1 microsecond'; END $$;

CREATE OR REPLACE FUNCTION __SCHEMA__.timestamp_us(t timestamptz) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$ BEGIN RETURN (extract(epoch FROM t) * 1000000)::bigint; END $$;

-- The expiry `ms` milliseconds from now, or Redis's error for a bad one.
CREATE OR REPLACE FUNCTION __SCHEMA__.expiry_in(ms bigint, command text) RETURNS timestamptz
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  now_us bigint := clock_us();
BEGIN
  -- Past 2^53 µs (year 2255) the microseconds would not be exact.
  IF ms > (9007199254740991 - now_us) / 1000 THEN
    RAISE EXCEPTION 'ERR invalid expire time in ''%'' command', command
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN us_timestamp(now_us + ms * 1000);
END
$$;

-- The key's kind, value and expiry when live; NULLs when absent. An expired
-- key is deleted on the way (only while still expired: a concurrent SET of
-- the same key is never deleted by mistake).
CREATE OR REPLACE FUNCTION __SCHEMA__.live_key(k text, OUT kind text, OUT value text, OUT expires_at timestamptz)
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  now_at timestamptz;
BEGIN
  SELECT t.kind, t.value, t.expires_at INTO kind, value, expires_at FROM keys t WHERE t.key = k;
  IF expires_at IS NOT NULL THEN
    now_at := us_timestamp(clock_us());
    IF expires_at <= now_at THEN
      DELETE FROM keys t WHERE t.key = k AND t.expires_at <= now_at;
      kind := NULL;
      value := NULL;
      expires_at := NULL;
    END IF;
  END IF;
END
$$;

-- The kind of a live key that must be `expected` (WRONGTYPE otherwise), or
-- NULL when absent.
CREATE OR REPLACE FUNCTION __SCHEMA__.kind_of(k text, expected text) RETURNS text
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  found_kind text;
BEGIN
  SELECT l.kind INTO found_kind FROM live_key(k) l;
  IF found_kind IS DISTINCT FROM expected AND found_kind IS NOT NULL THEN
    PERFORM wrongtype();
  END IF;
  RETURN found_kind;
END
$$;

-- Creates an aggregate key of `expected` kind when absent (after kind_of).
CREATE OR REPLACE FUNCTION __SCHEMA__.create_key(k text, expected text) RETURNS void
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF kind_of(k, expected) IS NULL THEN
    INSERT INTO keys (key, kind) VALUES (k, expected);
  END IF;
END
$$;

-- Deletes an aggregate key left without members, as Redis does.
CREATE OR REPLACE FUNCTION __SCHEMA__.drop_if_empty(k text) RETURNS void
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  DELETE FROM keys t
   WHERE t.key = k
     AND NOT EXISTS (SELECT 1 FROM zset_members z WHERE z.key = k)
     AND NOT EXISTS (SELECT 1 FROM set_members s WHERE s.key = k)
     AND NOT EXISTS (SELECT 1 FROM hash_fields h WHERE h.key = k)
     AND t.kind <> 'string';
END
$$;

-- A score range bound of ZRANGEBYSCORE / ZCOUNT: `(` makes it exclusive.
CREATE OR REPLACE FUNCTION __SCHEMA__.score_bound(s text, OUT bound double precision, OUT exclusive boolean)
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  exclusive := left(s, 1) = '(';
  bound := redis_float(CASE WHEN exclusive THEN substr(s, 2) ELSE s END);
  IF bound IS NULL THEN
    RAISE EXCEPTION 'ERR min or max is not a float' USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- The primitives: the Redis commands the scripts call, with Redis's
-- semantics and replies (nil = NULL, integer = bigint, bulk = text,
-- array = text[]). Every argument is text, as on the wire.
-- ---------------------------------------------------------------------------

-- GET key: the string, NULL when absent; WRONGTYPE on another kind.
CREATE OR REPLACE FUNCTION __SCHEMA__.get(k text) RETURNS text
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  found_kind text;
  found_value text;
BEGIN
  SELECT l.kind, l.value INTO found_kind, found_value FROM live_key(k) l;
  IF found_kind <> 'string' THEN
    PERFORM wrongtype();
  END IF;
  RETURN found_value;
END
$$;

-- SET key value [PX ms | EX s]: replaces any key (of any kind), with the
-- expiry given or none. Returns 'OK'.
CREATE OR REPLACE FUNCTION __SCHEMA__.set(k text, v text, VARIADIC options text[] DEFAULT '{}')
RETURNS text
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  i integer := 1;
  n integer := coalesce(cardinality(options), 0);
  ms bigint;
  expires timestamptz;
BEGIN
  IF k IS NULL OR v IS NULL THEN
    RAISE EXCEPTION 'ERR wrong number of arguments for ''set'' command' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  WHILE i <= n LOOP
    IF upper(options[i]) IN ('PX', 'EX') AND i < n AND ms IS NULL THEN
      ms := redis_int(options[i + 1]);
      IF ms <= 0 OR (upper(options[i]) = 'EX' AND ms > 9223372036854775) THEN
        RAISE EXCEPTION 'ERR invalid expire time in ''set'' command' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF upper(options[i]) = 'EX' THEN
        ms := ms * 1000;
      END IF;
      i := i + 2;
    ELSE
      RAISE EXCEPTION 'ERR syntax error' USING ERRCODE = 'syntax_error';
    END IF;
  END LOOP;
  IF ms IS NOT NULL THEN
    expires := expiry_in(ms, 'set');
  END IF;
  PERFORM lock_key(k);
  DELETE FROM keys t WHERE t.key = k AND t.kind <> 'string';
  INSERT INTO keys AS t (key, kind, value, expires_at) VALUES (k, 'string', v, expires)
  ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at;
  RETURN 'OK';
END
$$;

-- DEL key [key ...]: how many live keys were deleted.
CREATE OR REPLACE FUNCTION __SCHEMA__.del(VARIADIC ks text[]) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  k text;
  deleted bigint := 0;
BEGIN
  -- Locks in the order scripts take them (by lock number).
  FOR k IN SELECT d.u FROM (SELECT DISTINCT u FROM unnest(ks) u) d ORDER BY tag_lock_id(d.u), d.u LOOP
    PERFORM lock_key(k);
    IF (SELECT l.kind FROM live_key(k) l) IS NOT NULL THEN
      DELETE FROM keys t WHERE t.key = k;
      deleted := deleted + 1;
    END IF;
  END LOOP;
  RETURN deleted;
END
$$;

-- EXISTS key [key ...]: how many of the keys named are live (a key named
-- twice counts twice, as in Redis).
CREATE OR REPLACE FUNCTION __SCHEMA__."exists"(VARIADIC ks text[]) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  k text;
  live bigint := 0;
BEGIN
  FOREACH k IN ARRAY ks LOOP
    IF (SELECT l.kind FROM live_key(k) l) IS NOT NULL THEN
      live := live + 1;
    END IF;
  END LOOP;
  RETURN live;
END
$$;

-- PTTL key: -2 when absent, -1 without expiry, else the milliseconds left,
-- counted as Redis counts them: the expiry's millisecond minus the clock's
-- millisecond (both truncated), never below 0.
CREATE OR REPLACE FUNCTION __SCHEMA__.pttl(k text) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  found_kind text;
  found_expiry timestamptz;
BEGIN
  SELECT l.kind, l.expires_at INTO found_kind, found_expiry FROM live_key(k) l;
  IF found_kind IS NULL THEN
    RETURN -2;
  ELSIF found_expiry IS NULL THEN
    RETURN -1;
  END IF;
  RETURN greatest(timestamp_us(found_expiry) / 1000 - clock_us() / 1000, 0);
END
$$;

-- PEXPIRE key ms: 1 when the key is live (a time not in the future deletes
-- it, as Redis does), 0 when absent.
CREATE OR REPLACE FUNCTION __SCHEMA__.pexpire(k text, ms text) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  delta bigint := redis_int(ms);
BEGIN
  PERFORM lock_key(k);
  IF (SELECT l.kind FROM live_key(k) l) IS NULL THEN
    RETURN 0;
  END IF;
  IF delta <= 0 THEN
    DELETE FROM keys t WHERE t.key = k;
  ELSE
    UPDATE keys t SET expires_at = expiry_in(delta, 'pexpire') WHERE t.key = k;
  END IF;
  RETURN 1;
END
$$;

-- INCR key: the new value; an absent key counts as 0; the expiry stays.
-- Redis's errors for a value that is no integer or would overflow.
CREATE OR REPLACE FUNCTION __SCHEMA__.incr(k text) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  found_kind text;
  found_value text;
  n bigint;
BEGIN
  PERFORM lock_key(k);
  SELECT l.kind, l.value INTO found_kind, found_value FROM live_key(k) l;
  IF found_kind IS NULL THEN
    INSERT INTO keys (key, kind, value) VALUES (k, 'string', '1');
    RETURN 1;
  ELSIF found_kind <> 'string' THEN
    PERFORM wrongtype();
  END IF;
  n := redis_int(found_value);
  IF n = 9223372036854775807 THEN
    RAISE EXCEPTION 'ERR increment or decrement would overflow' USING ERRCODE = 'numeric_value_out_of_range';
  END IF;
  UPDATE keys t SET value = (n + 1)::text WHERE t.key = k;
  RETURN n + 1;
END
$$;

-- MGET key [key ...]: each key's string, NULL when absent or of another kind.
CREATE OR REPLACE FUNCTION __SCHEMA__.mget(VARIADIC ks text[]) RETURNS text[]
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  k text;
  found_kind text;
  found_value text;
  values_found text[] := '{}';
BEGIN
  IF coalesce(cardinality(ks), 0) = 0 THEN
    RAISE EXCEPTION 'ERR wrong number of arguments for ''mget'' command' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOREACH k IN ARRAY ks LOOP
    SELECT l.kind, l.value INTO found_kind, found_value FROM live_key(k) l;
    values_found := values_found || CASE WHEN found_kind = 'string' THEN found_value END;
  END LOOP;
  RETURN values_found;
END
$$;

-- ZADD key score member [score member ...]: how many members were added
-- (a member already there gets the new score and does not count).
CREATE OR REPLACE FUNCTION __SCHEMA__.zadd(k text, VARIADIC score_members text[]) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  n integer := coalesce(cardinality(score_members), 0);
  added bigint := 0;
  i integer;
BEGIN
  IF n = 0 OR n % 2 <> 0 THEN
    RAISE EXCEPTION 'ERR syntax error' USING ERRCODE = 'syntax_error';
  END IF;
  FOR i IN 1 .. n BY 2 LOOP
    IF redis_float(score_members[i]) IS NULL OR score_members[i + 1] IS NULL THEN
      RAISE EXCEPTION 'ERR value is not a valid float' USING ERRCODE = 'invalid_parameter_value';
    END IF;
  END LOOP;
  PERFORM lock_key(k);
  PERFORM create_key(k, 'zset');
  FOR i IN 1 .. n BY 2 LOOP
    INSERT INTO zset_members AS z (key, member, score)
    VALUES (k, score_members[i + 1], redis_float(score_members[i]))
    ON CONFLICT (key, member) DO UPDATE SET score = EXCLUDED.score
    RETURNING (xmax = 0)::integer + added INTO added;  -- xmax = 0: inserted, not updated
  END LOOP;
  RETURN added;
END
$$;

-- ZREM key member [member ...]: how many were removed; an emptied key goes.
CREATE OR REPLACE FUNCTION __SCHEMA__.zrem(k text, VARIADIC members text[]) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  removed bigint;
BEGIN
  IF coalesce(cardinality(members), 0) = 0 THEN
    RAISE EXCEPTION 'ERR wrong number of arguments for ''zrem'' command' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM lock_key(k);
  IF kind_of(k, 'zset') IS NULL THEN
    RETURN 0;
  END IF;
  DELETE FROM zset_members z WHERE z.key = k AND z.member = ANY (members);
  GET DIAGNOSTICS removed = ROW_COUNT;
  IF removed > 0 THEN
    PERFORM drop_if_empty(k);
  END IF;
  RETURN removed;
END
$$;

-- ZSCORE key member: the score (as Redis writes it), NULL when absent.
CREATE OR REPLACE FUNCTION __SCHEMA__.zscore(k text, m text) RETURNS text
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF kind_of(k, 'zset') IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN (SELECT score_text(z.score) FROM zset_members z WHERE z.key = k AND z.member = m);
END
$$;

-- ZRANK key member: the 0-based rank by (score, member), NULL when absent.
CREATE OR REPLACE FUNCTION __SCHEMA__.zrank(k text, m text) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  s double precision;
BEGIN
  IF kind_of(k, 'zset') IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT z.score INTO s FROM zset_members z WHERE z.key = k AND z.member = m;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  RETURN (SELECT count(*) FROM zset_members z WHERE z.key = k AND (z.score, z.member) < (s, m));
END
$$;

-- ZRANGE key start stop [WITHSCORES]: members by rank, start and stop
-- inclusive, negative ones counted from the end; with WITHSCORES each member
-- is followed by its score.
CREATE OR REPLACE FUNCTION __SCHEMA__.zrange(k text, start text, stop text, VARIADIC options text[] DEFAULT '{}')
RETURNS text[]
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  first bigint := redis_int(start);
  last bigint := redis_int(stop);
  withscores boolean := false;
  option text;
  card bigint;
  result text[];
BEGIN
  FOREACH option IN ARRAY coalesce(options, '{}') LOOP
    IF upper(option) = 'WITHSCORES' THEN
      withscores := true;
    ELSE
      RAISE EXCEPTION 'ERR syntax error' USING ERRCODE = 'syntax_error';
    END IF;
  END LOOP;
  IF kind_of(k, 'zset') IS NULL THEN
    RETURN '{}';
  END IF;
  SELECT count(*) INTO card FROM zset_members z WHERE z.key = k;
  IF first < 0 THEN first := first + card; END IF;
  IF last < 0 THEN last := last + card; END IF;
  IF first < 0 THEN first := 0; END IF;
  IF first > last OR first >= card THEN
    RETURN '{}';
  END IF;
  IF last >= card THEN last := card - 1; END IF;
  SELECT coalesce(array_agg(item ORDER BY r.n, p.part), '{}') INTO result
    FROM (SELECT z.member, z.score, row_number() OVER (ORDER BY z.score, z.member) AS n
            FROM zset_members z WHERE z.key = k
           ORDER BY z.score, z.member OFFSET first LIMIT last - first + 1) r
   CROSS JOIN LATERAL (VALUES (1, r.member), (2, score_text(r.score))) AS p (part, item)
   WHERE p.part = 1 OR withscores;
  RETURN result;
END
$$;

-- ZRANGEBYSCORE key min max [LIMIT offset count]: members with min <= score
-- <= max (`(` excludes a bound; -inf, +inf), in order; a negative offset
-- gives none, a negative count no limit.
CREATE OR REPLACE FUNCTION __SCHEMA__.zrangebyscore(k text, min text, max text, VARIADIC options text[] DEFAULT '{}')
RETURNS text[]
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  low record := score_bound(min);
  high record := score_bound(max);
  n integer := coalesce(cardinality(options), 0);
  skip bigint := 0;
  take bigint := -1;
  result text[];
BEGIN
  IF n = 3 AND upper(options[1]) = 'LIMIT' THEN
    skip := redis_int(options[2]);
    take := redis_int(options[3]);
  ELSIF n <> 0 THEN
    RAISE EXCEPTION 'ERR syntax error' USING ERRCODE = 'syntax_error';
  END IF;
  IF kind_of(k, 'zset') IS NULL OR skip < 0 THEN
    RETURN '{}';
  END IF;
  SELECT coalesce(array_agg(r.member ORDER BY r.score, r.member), '{}') INTO result
    FROM (SELECT z.member, z.score FROM zset_members z
           WHERE z.key = k
             AND (z.score > low.bound OR (NOT low.exclusive AND z.score = low.bound))
             AND (z.score < high.bound OR (NOT high.exclusive AND z.score = high.bound))
           ORDER BY z.score, z.member
          OFFSET skip LIMIT CASE WHEN take < 0 THEN NULL ELSE take END) r;
  RETURN result;
END
$$;

-- ZCOUNT key min max: how many members have a score in the range.
CREATE OR REPLACE FUNCTION __SCHEMA__.zcount(k text, min text, max text) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  low record := score_bound(min);
  high record := score_bound(max);
BEGIN
  IF kind_of(k, 'zset') IS NULL THEN
    RETURN 0;
  END IF;
  RETURN (SELECT count(*) FROM zset_members z
           WHERE z.key = k
             AND (z.score > low.bound OR (NOT low.exclusive AND z.score = low.bound))
             AND (z.score < high.bound OR (NOT high.exclusive AND z.score = high.bound)));
END
$$;

-- SADD key member [member ...]: how many were added.
CREATE OR REPLACE FUNCTION __SCHEMA__.sadd(k text, VARIADIC members text[]) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  added bigint;
BEGIN
  IF coalesce(cardinality(members), 0) = 0 OR array_position(members, NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'ERR wrong number of arguments for ''sadd'' command' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM lock_key(k);
  PERFORM create_key(k, 'set');
  INSERT INTO set_members (key, member) SELECT DISTINCT k, m FROM unnest(members) m
  ON CONFLICT DO NOTHING;
  GET DIAGNOSTICS added = ROW_COUNT;
  RETURN added;
END
$$;

-- SREM key member [member ...]: how many were removed; an emptied key goes.
CREATE OR REPLACE FUNCTION __SCHEMA__.srem(k text, VARIADIC members text[]) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  removed bigint;
BEGIN
  IF coalesce(cardinality(members), 0) = 0 THEN
    RAISE EXCEPTION 'ERR wrong number of arguments for ''srem'' command' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM lock_key(k);
  IF kind_of(k, 'set') IS NULL THEN
    RETURN 0;
  END IF;
  DELETE FROM set_members s WHERE s.key = k AND s.member = ANY (members);
  GET DIAGNOSTICS removed = ROW_COUNT;
  IF removed > 0 THEN
    PERFORM drop_if_empty(k);
  END IF;
  RETURN removed;
END
$$;

-- SMEMBERS key: the members (in byte order; Redis promises no order).
CREATE OR REPLACE FUNCTION __SCHEMA__.smembers(k text) RETURNS text[]
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF kind_of(k, 'set') IS NULL THEN
    RETURN '{}';
  END IF;
  RETURN (SELECT coalesce(array_agg(s.member ORDER BY s.member), '{}') FROM set_members s WHERE s.key = k);
END
$$;

-- HSET key field value [field value ...]: how many fields were new.
CREATE OR REPLACE FUNCTION __SCHEMA__.hset(k text, VARIADIC field_values text[]) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  n integer := coalesce(cardinality(field_values), 0);
  added bigint := 0;
  i integer;
BEGIN
  IF n = 0 OR n % 2 <> 0 OR array_position(field_values, NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'ERR wrong number of arguments for ''hset'' command' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM lock_key(k);
  PERFORM create_key(k, 'hash');
  FOR i IN 1 .. n BY 2 LOOP
    INSERT INTO hash_fields AS h (key, field, value) VALUES (k, field_values[i], field_values[i + 1])
    ON CONFLICT (key, field) DO UPDATE SET value = EXCLUDED.value
    RETURNING (xmax = 0)::integer + added INTO added;
  END LOOP;
  RETURN added;
END
$$;

-- HGET key field: the value, NULL when absent.
CREATE OR REPLACE FUNCTION __SCHEMA__.hget(k text, f text) RETURNS text
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF kind_of(k, 'hash') IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN (SELECT h.value FROM hash_fields h WHERE h.key = k AND h.field = f);
END
$$;

-- HMGET key field [field ...]: each field's value, NULL when absent.
CREATE OR REPLACE FUNCTION __SCHEMA__.hmget(k text, VARIADIC fs text[]) RETURNS text[]
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF coalesce(cardinality(fs), 0) = 0 THEN
    RAISE EXCEPTION 'ERR wrong number of arguments for ''hmget'' command' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF kind_of(k, 'hash') IS NULL THEN
    RETURN array_fill(NULL::text, ARRAY[cardinality(fs)]);
  END IF;
  RETURN (SELECT array_agg(h.value ORDER BY f.i)
            FROM unnest(fs) WITH ORDINALITY AS f (field, i)
            LEFT JOIN hash_fields h ON h.key = k AND h.field = f.field);
END
$$;

-- TIME: {unix seconds, microseconds} of the server's clock, as strings.
CREATE OR REPLACE FUNCTION __SCHEMA__."time"() RETURNS text[]
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  us bigint := clock_us();
BEGIN
  RETURN ARRAY[(us / 1000000)::text, (us % 1000000)::text];
END
$$;

-- PUBLISH. A protocol channel (`<prefix>wake:<client id>`,
-- `<prefix>leader:<name>`) maps to the NOTIFY channel 'fl_' || md5(channel)
-- (md5 of its bytes; 35 characters, within NOTIFY's 63) and to the
-- listener key: the first 16 hex digits of the same md5 as a signed 64-bit
-- integer (big-endian). A listening connection LISTENs on the NOTIFY channel
-- and, for as long as it listens, holds a session-level advisory lock on the
-- listener key (pg_advisory_lock_shared(listener_key(channel)); the 64-bit
-- form). PUBLISH notifies and returns how many sessions hold that lock.
CREATE OR REPLACE FUNCTION __SCHEMA__.notify_channel(channel text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$ BEGIN RETURN 'fl_' || md5(channel); END $$;

CREATE OR REPLACE FUNCTION __SCHEMA__.listener_key(channel text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$ BEGIN RETURN ('x' || left(md5(channel), 16))::bit(64)::bigint; END $$;

-- PUBLISH channel message: the number of listeners (sessions holding the
-- channel's listener key). The notification goes out at commit. A message
-- NOTIFY cannot carry (8000 bytes or more) is not sent and reaches nobody: 0.
CREATE OR REPLACE FUNCTION __SCHEMA__.publish(channel text, message text) RETURNS bigint
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  lock_id bigint := listener_key(channel);
  listeners bigint;
BEGIN
  IF octet_length(message) >= 8000 THEN
    RETURN 0;
  END IF;
  PERFORM pg_notify(notify_channel(channel), message);
  SELECT count(DISTINCT l.pid) INTO listeners
    FROM pg_catalog.pg_locks l
   WHERE l.locktype = 'advisory'
     AND l.granted
     AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
     AND l.classid = ((lock_id >> 32) & 4294967295)::oid
     AND l.objid = (lock_id & 4294967295)::oid
     AND l.objsubid = 1;
  RETURN listeners;
END
$$;

-- redis.sha1hex: SHA-1 of the string's UTF-8 bytes, 40 lowercase hex digits
-- (PostgreSQL has no built-in SHA-1 without pgcrypto).
CREATE OR REPLACE FUNCTION __SCHEMA__.sha1hex(data text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  msg bytea := convert_to(data, 'UTF8');
  bits bigint := octet_length(convert_to(data, 'UTF8'))::bigint * 8;
  m constant bigint := 4294967295;
  h0 bigint := 1732584193;   -- 0x67452301
  h1 bigint := 4023233417;   -- 0xEFCDAB89
  h2 bigint := 2562383102;   -- 0x98BADCFE
  h3 bigint := 271733878;    -- 0x10325476
  h4 bigint := 3285377520;   -- 0xC3D2E1F0
  w bigint[];
  a bigint; b bigint; c bigint; d bigint; e bigint; f bigint; k bigint; t bigint;
  chunk integer;
  i integer;
  o integer;
BEGIN
  msg := msg || '\x80'::bytea;
  msg := msg || decode(repeat('00', (120 - octet_length(msg) % 64) % 64), 'hex');  -- to 56 mod 64
  msg := msg || int8send(bits);
  FOR chunk IN 0 .. octet_length(msg) / 64 - 1 LOOP
    w := '{}';
    FOR i IN 0 .. 15 LOOP
      o := chunk * 64 + i * 4;
      w[i] := (get_byte(msg, o)::bigint << 24) | (get_byte(msg, o + 1)::bigint << 16)
            | (get_byte(msg, o + 2)::bigint << 8) | get_byte(msg, o + 3)::bigint;
    END LOOP;
    FOR i IN 16 .. 79 LOOP
      t := w[i - 3] # w[i - 8] # w[i - 14] # w[i - 16];
      w[i] := ((t << 1) | (t >> 31)) & m;
    END LOOP;
    a := h0; b := h1; c := h2; d := h3; e := h4;
    FOR i IN 0 .. 79 LOOP
      IF i < 20 THEN
        f := (b & c) | ((~b) & d); k := 1518500249;   -- 0x5A827999
      ELSIF i < 40 THEN
        f := b # c # d; k := 1859775393;              -- 0x6ED9EBA1
      ELSIF i < 60 THEN
        f := (b & c) | (b & d) | (c & d); k := 2400959708;  -- 0x8F1BBCDC
      ELSE
        f := b # c # d; k := 3395469782;              -- 0xCA62C1D6
      END IF;
      t := ((((a << 5) | (a >> 27)) & m) + (f & m) + e + k + w[i]) & m;
      e := d; d := c; c := ((b << 30) | (b >> 2)) & m; b := a; a := t;
    END LOOP;
    h0 := (h0 + a) & m; h1 := (h1 + b) & m; h2 := (h2 + c) & m; h3 := (h3 + d) & m; h4 := (h4 + e) & m;
  END LOOP;
  RETURN lpad(to_hex(h0), 8, '0') || lpad(to_hex(h1), 8, '0') || lpad(to_hex(h2), 8, '0')
      || lpad(to_hex(h3), 8, '0') || lpad(to_hex(h4), 8, '0');
END
$$;

-- ---------------------------------------------------------------------------
-- The scripts' shared helpers (core/src/scripts.rs), line by line. Each Lua
-- line is kept as a comment above its port. Lua's false/nil is SQL NULL; a
-- Lua number is a double precision; Lua's `==`/`~=` with a value that may be
-- false is IS NOT DISTINCT FROM / IS DISTINCT FROM; Lua's `and`/`or` short-
-- circuit, SQL's do not promise to, so a call with effects that Lua guards
-- with `and`/`or` gets an IF of its own.
-- ---------------------------------------------------------------------------

-- Runs first in every script: checks the arguments, takes the advisory lock
-- of each hash tag of KEYS (in lock-number order, so scripts cannot
-- deadlock), then freezes the clock until leave_script().
CREATE OR REPLACE FUNCTION __SCHEMA__.enter_script(script text, keys text[], args text[], nkeys integer, nargs integer)
RETURNS void
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  lock_id bigint;
BEGIN
  IF coalesce(cardinality(keys), 0) < nkeys OR coalesce(cardinality(args), 0) < nargs
     OR array_position(keys, NULL) IS NOT NULL OR array_position(args, NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'ERR % takes at least % keys and % arguments, none NULL', upper(script), nkeys, nargs
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR lock_id IN SELECT DISTINCT tag_lock_id(k) FROM unnest(keys) k ORDER BY 1 LOOP
    PERFORM pg_advisory_xact_lock(lock_id);
  END LOOP;
  PERFORM set_config('fencelock.script_clock', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint::text, true);
END
$$;

CREATE OR REPLACE FUNCTION __SCHEMA__.leave_script() RETURNS void
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  PERFORM set_config('fencelock.script_clock', '', true);
END
$$;

-- local function decimal_less(a, b)
--   if #a ~= #b then return #a < #b end
--   return a < b
-- end
CREATE OR REPLACE FUNCTION __SCHEMA__.decimal_less(a text, b text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
SET search_path = __SCHEMA__, pg_temp
AS $$
BEGIN
  IF octet_length(a) <> octet_length(b) THEN RETURN octet_length(a) < octet_length(b); END IF;
  RETURN a COLLATE "C" < b COLLATE "C";
END
$$;

-- local function now_ms()
--   local t = redis.call('TIME')
--   return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- end
CREATE OR REPLACE FUNCTION __SCHEMA__.now_ms() RETURNS double precision
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  t text[] := "time"();
BEGIN
  RETURN tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000);
END
$$;

-- local function drop_expired(queue, leases, now)
CREATE OR REPLACE FUNCTION __SCHEMA__.drop_expired(queue text, leases text, now double precision)
RETURNS void
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  gone text[];
BEGIN
  -- local gone = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 100)
  gone := zrangebyscore(leases, '-inf', lua_tostring(now), 'LIMIT', '0', '100');
  -- if #gone > 0 then
  IF cardinality(gone) > 0 THEN
    -- redis.call('ZREM', queue, unpack(gone))
    PERFORM zrem(queue, VARIADIC gone);
    -- redis.call('ZREM', leases, unpack(gone))
    PERFORM zrem(leases, VARIADIC gone);
  END IF;
END
$$;

-- local function hand_off(lock, queue, leases, window_ms, counted)
CREATE OR REPLACE FUNCTION __SCHEMA__.hand_off(lock text, queue text, leases text, window_ms text, counted text)
RETURNS void
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  prefix text;
  head text;
  channel text;
  published bigint;
BEGIN
  -- if redis.call('EXISTS', queue) == 0 then
  IF "exists"(queue) = 0 THEN
    -- redis.call('DEL', lock)
    PERFORM del(lock);
    -- return
    RETURN;
  END IF;
  -- drop_expired(queue, leases, now_ms())
  PERFORM drop_expired(queue, leases, now_ms());
  -- local prefix = string.match(lock, '^[^{]*')
  prefix := split_part(lock, '{', 1);
  -- for _ = 1, 8 do
  FOR _ IN 1 .. 8 LOOP
    -- local head = redis.call('ZRANGE', queue, 0, 0)[1]
    head := (zrange(queue, '0', '0'))[1];
    -- if not head then break end
    EXIT WHEN head IS NULL;
    -- local channel = prefix .. 'wake:' .. string.sub(head, 1, 32)
    channel := prefix || 'wake:' || left(head, 32);
    -- if redis.call('PUBLISH', channel, head .. ' ' .. lock) > 0 or counted == '0' then
    published := publish(channel, head || ' ' || lock);
    IF published > 0 OR counted = '0' THEN
      -- redis.call('SET', lock, 'w:' .. head, 'PX', window_ms)
      PERFORM set(lock, 'w:' || head, 'PX', window_ms);
      -- return
      RETURN;
    END IF;
    -- redis.call('ZREM', queue, head)
    PERFORM zrem(queue, head);
    -- redis.call('ZREM', leases, head)
    PERFORM zrem(leases, head);
  END LOOP;
  -- redis.call('DEL', lock)
  PERFORM del(lock);
END
$$;

-- local function head_then_drop(queue, leases)
CREATE OR REPLACE FUNCTION __SCHEMA__.head_then_drop(queue text, leases text) RETURNS text
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  head text;
BEGIN
  -- local head = redis.call('ZRANGE', queue, 0, 0)[1]
  head := (zrange(queue, '0', '0'))[1];
  -- drop_expired(queue, leases, now_ms())
  PERFORM drop_expired(queue, leases, now_ms());
  -- return head
  RETURN head;
END
$$;

-- local function wake_new_head(queue, before, named)
CREATE OR REPLACE FUNCTION __SCHEMA__.wake_new_head(queue text, before text, named text) RETURNS void
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  head text;
  prefix text;
BEGIN
  -- local head = redis.call('ZRANGE', queue, 0, 0)[1]
  head := (zrange(queue, '0', '0'))[1];
  -- if head and head ~= before then
  IF head IS NOT NULL AND head IS DISTINCT FROM before THEN
    -- local prefix = string.match(named, '^[^{]*')
    prefix := split_part(named, '{', 1);
    -- redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(head, 1, 32), head .. ' ' .. named)
    PERFORM publish(prefix || 'wake:' || left(head, 32), head || ' ' || named);
  END IF;
END
$$;

-- local function enter_queue(queue, leases, waiter, asked, lease_ms, now)
CREATE OR REPLACE FUNCTION __SCHEMA__.enter_queue(queue text, leases text, waiter text, asked double precision,
  lease_ms double precision, now double precision, OUT ticket double precision, OUT rank double precision)
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  last text;
BEGIN
  -- (A nil asked or lease_ms is a Lua error below, whichever branch runs.)
  IF asked IS NULL OR lease_ms IS NULL THEN
    RAISE EXCEPTION 'ERR attempt to compare or add a nil value' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- local ticket = tonumber(redis.call('ZSCORE', queue, waiter))
  ticket := tonumber(zscore(queue, waiter));
  -- if ticket == nil then
  IF ticket IS NULL THEN
    -- local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')[2]
    last := (zrange(queue, '-1', '-1', 'WITHSCORES'))[2];
    -- ticket = math.max((tonumber(last) or 0) + 1, asked)
    ticket := math_max(coalesce(tonumber(last), 0) + 1, asked);
    -- redis.call('ZADD', queue, string.format('%d', ticket), waiter)
    PERFORM zadd(queue, fmt_d(ticket), waiter);
  -- elseif asked > ticket then
  ELSIF asked > ticket THEN
    -- ticket = asked
    ticket := asked;
    -- redis.call('ZADD', queue, string.format('%d', ticket), waiter)
    PERFORM zadd(queue, fmt_d(ticket), waiter);
  END IF;
  -- redis.call('ZADD', leases, string.format('%d', now + lease_ms), waiter)
  PERFORM zadd(leases, fmt_d(now + lease_ms), waiter);
  -- redis.call('PEXPIRE', queue, lease_ms)
  PERFORM pexpire(queue, lua_tostring(lease_ms));
  -- redis.call('PEXPIRE', leases, lease_ms)
  PERFORM pexpire(leases, lua_tostring(lease_ms));
  -- return ticket, redis.call('ZRANK', queue, waiter)
  rank := zrank(queue, waiter);  -- (`position` cannot name a parameter)
END
$$;

-- local function has_readers(readers)
CREATE OR REPLACE FUNCTION __SCHEMA__.has_readers(readers text) RETURNS boolean
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  key text;
BEGIN
  -- for _, key in ipairs(redis.call('SMEMBERS', readers)) do
  FOREACH key IN ARRAY smembers(readers) LOOP
    -- if redis.call('EXISTS', key) == 1 then return true end
    IF "exists"(key) = 1 THEN RETURN true; END IF;
    -- redis.call('SREM', readers, key)
    PERFORM srem(readers, key);
  END LOOP;
  -- return false
  RETURN false;
END
$$;

-- local function writer_ahead(queue, writers, ticket)
CREATE OR REPLACE FUNCTION __SCHEMA__.writer_ahead(queue text, writers text, ticket double precision) RETURNS text
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  first text[];
BEGIN
  -- while true do
  LOOP
    -- local first = redis.call('ZRANGE', writers, 0, 0, 'WITHSCORES')
    first := zrange(writers, '0', '0', 'WITHSCORES');
    -- if #first == 0 then return nil end
    IF cardinality(first) = 0 THEN RETURN NULL; END IF;
    -- if redis.call('ZSCORE', queue, first[1]) then
    IF zscore(queue, first[1]) IS NOT NULL THEN
      -- if ticket == nil or tonumber(first[2]) < ticket then return first[1] end
      IF ticket IS NULL OR tonumber(first[2]) < ticket THEN RETURN first[1]; END IF;
      -- return nil
      RETURN NULL;
    END IF;
    -- redis.call('ZREM', writers, first[1])
    PERFORM zrem(writers, first[1]);
  END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- The scripts' ports: __SCHEMA__.lua_<name>(keys, args) returns the Redis
-- reply as jsonb (integer: number, bulk string: string, nil/false: null,
-- array: array). keys[i] is KEYS[i] and args[i] is ARGV[i]: both 1-based, as
-- in Lua. They take no lock: call them through script(name, …) (below).
-- ---------------------------------------------------------------------------

-- ACQUIRE(KEYS = {lock, fence, queue, leases}, ARGV = {token, ttl_ms, waiter, ticket, lease_ms, fair})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_acquire(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  lock text; queue text; leases text; waiter text;
  current text;
  free boolean;
  head text;
  ticket double precision; position double precision;
  now double precision;
  asked double precision;
  last text;
  retry_in double precision;
  lease_end double precision;
  prefix text;
BEGIN
  -- local lock, queue, leases, waiter = KEYS[1], KEYS[3], KEYS[4], ARGV[3]
  lock := keys[1]; queue := keys[3]; leases := keys[4]; waiter := args[3];
  -- local current = redis.call('GET', lock)
  current := get(lock);
  -- local free = current == false or (waiter ~= '' and current == 'w:' .. waiter)
  free := current IS NULL OR (waiter <> '' AND current = 'w:' || waiter);
  -- if free and current == false and ARGV[6] == '1' then
  IF free AND current IS NULL AND args[6] = '1' THEN
    -- drop_expired(queue, leases, now_ms())
    PERFORM drop_expired(queue, leases, now_ms());
    -- local head = redis.call('ZRANGE', queue, 0, 0)[1]
    head := (zrange(queue, '0', '0'))[1];
    -- free = head == nil or head == waiter
    free := head IS NULL OR head = waiter;
  END IF;
  -- if free then
  IF free THEN
    -- redis.call('SET', lock, ARGV[1], 'PX', ARGV[2])
    PERFORM set(lock, args[1], 'PX', args[2]);
    -- if waiter ~= '' and ARGV[4] ~= '0' then
    IF waiter <> '' AND args[4] <> '0' THEN
      -- redis.call('ZREM', queue, waiter)
      PERFORM zrem(queue, waiter);
      -- redis.call('ZREM', leases, waiter)
      PERFORM zrem(leases, waiter);
    END IF;
    -- return redis.call('INCR', KEYS[2])
    RETURN to_jsonb(lua_integer(incr(keys[2])));
  END IF;
  -- local ticket, position = 0, -1
  ticket := 0; position := -1;
  -- local now = now_ms()
  now := now_ms();
  -- if waiter ~= '' then
  IF waiter <> '' THEN
    -- local asked = tonumber(ARGV[4])
    asked := tonumber(args[4]);
    -- ticket = tonumber(redis.call('ZSCORE', queue, waiter))
    ticket := tonumber(zscore(queue, waiter));
    -- if ticket == nil then
    IF ticket IS NULL THEN
      -- local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')[2]
      last := (zrange(queue, '-1', '-1', 'WITHSCORES'))[2];
      -- ticket = math.max((tonumber(last) or 0) + 1, asked)
      ticket := math_max(coalesce(tonumber(last), 0) + 1, asked);
      -- redis.call('ZADD', queue, string.format('%d', ticket), waiter)
      PERFORM zadd(queue, fmt_d(ticket), waiter);
    -- elseif asked > ticket then
    ELSIF asked IS NULL THEN
      RAISE EXCEPTION 'ERR attempt to compare nil with number' USING ERRCODE = 'invalid_parameter_value';
    ELSIF asked > ticket THEN
      -- ticket = asked
      ticket := asked;
      -- redis.call('ZADD', queue, string.format('%d', ticket), waiter)
      PERFORM zadd(queue, fmt_d(ticket), waiter);
    END IF;
    -- redis.call('ZADD', leases, string.format('%d', now + ARGV[5]), waiter)
    PERFORM zadd(leases, fmt_d(now + arith(args[5])), waiter);
    -- redis.call('PEXPIRE', queue, ARGV[5])
    PERFORM pexpire(queue, args[5]);
    -- redis.call('PEXPIRE', leases, ARGV[5])
    PERFORM pexpire(leases, args[5]);
    -- position = redis.call('ZRANK', queue, waiter)
    position := zrank(queue, waiter);
  END IF;
  -- local retry_in = redis.call('PTTL', lock)
  retry_in := pttl(lock);
  -- if retry_in == -2 then
  IF retry_in = -2 THEN
    -- local head = redis.call('ZRANGE', queue, 0, 0)[1]
    head := (zrange(queue, '0', '0'))[1];
    -- local lease_end = head and tonumber(redis.call('ZSCORE', leases, head))
    lease_end := CASE WHEN head IS NOT NULL THEN tonumber(zscore(leases, head)) END;
    -- retry_in = lease_end and math.max(lease_end - now, 0) or 0
    retry_in := CASE WHEN lease_end IS NOT NULL THEN math_max(lease_end - now, 0) ELSE 0 END;
    -- if head then
    IF head IS NOT NULL THEN
      -- local prefix = string.match(lock, '^[^{]*')
      prefix := split_part(lock, '{', 1);
      -- redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(head, 1, 32), head .. ' ' .. lock)
      PERFORM publish(prefix || 'wake:' || left(head, 32), head || ' ' || lock);
    END IF;
  END IF;
  -- return {0, retry_in, ticket, position}
  RETURN jsonb_build_array(0, lua_integer(retry_in), lua_integer(ticket), lua_integer(position));
END
$$;

-- RELEASE(KEYS = {lock, queue, leases}, ARGV = {token, window_ms, counted, keep_for})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_release(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  current text;
BEGIN
  -- local current = redis.call('GET', KEYS[1])
  current := get(keys[1]);
  -- if current == ARGV[1] then
  IF current IS NOT DISTINCT FROM args[1] THEN
    -- if ARGV[4] and ARGV[4] ~= '' then
    IF args[4] IS NOT NULL AND args[4] <> '' THEN
      -- redis.call('SET', KEYS[1], 'w:' .. ARGV[4], 'PX', ARGV[2])
      PERFORM set(keys[1], 'w:' || args[4], 'PX', args[2]);
    -- elseif ARGV[2] == '0' then
    ELSIF args[2] = '0' THEN
      -- redis.call('DEL', KEYS[1])
      PERFORM del(keys[1]);
    -- else
    ELSE
      -- hand_off(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3])
      PERFORM hand_off(keys[1], keys[2], keys[3], args[2], args[3]);
    END IF;
    -- return 1
    RETURN to_jsonb(1);
  END IF;
  -- if current == false then return -1 end
  IF current IS NULL THEN RETURN to_jsonb(-1); END IF;
  -- return 0
  RETURN to_jsonb(0);
END
$$;

-- LEAVE(KEYS = {lock, queue, leases}, ARGV = {waiter, window_ms, counted})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_leave(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  current text;
  head text;
BEGIN
  -- local current = redis.call('GET', KEYS[1])
  current := get(keys[1]);
  -- local head
  -- if current == false then head = head_then_drop(KEYS[2], KEYS[3]) end
  IF current IS NULL THEN head := head_then_drop(keys[2], keys[3]); END IF;
  -- redis.call('ZREM', KEYS[2], ARGV[1])
  PERFORM zrem(keys[2], args[1]);
  -- redis.call('ZREM', KEYS[3], ARGV[1])
  PERFORM zrem(keys[3], args[1]);
  -- if current == 'w:' .. ARGV[1] then
  IF current IS NOT DISTINCT FROM 'w:' || args[1] THEN
    -- hand_off(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3])
    PERFORM hand_off(keys[1], keys[2], keys[3], args[2], args[3]);
    -- return 1
    RETURN to_jsonb(1);
  END IF;
  -- if current == false then wake_new_head(KEYS[2], head, KEYS[1]) end
  IF current IS NULL THEN PERFORM wake_new_head(keys[2], head, keys[1]); END IF;
  -- return 0
  RETURN to_jsonb(0);
END
$$;

-- EXTEND(KEYS = {lock, [size]}, ARGV = {token, ttl_ms})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_extend(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  current text;
  left_ms bigint;  -- `left` is an SQL keyword
BEGIN
  -- local current = redis.call('GET', KEYS[1])
  current := get(keys[1]);
  -- if current == ARGV[1] then
  IF current IS NOT DISTINCT FROM args[1] THEN
    -- redis.call('PEXPIRE', KEYS[1], ARGV[2])
    PERFORM pexpire(keys[1], args[2]);
    -- if KEYS[2] then
    IF cardinality(keys) >= 2 THEN
      -- local left = redis.call('PTTL', KEYS[2])
      left_ms := pttl(keys[2]);
      -- if left >= 0 and left < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
      IF left_ms >= 0 AND left_ms < tonumber(args[2]) THEN
        PERFORM pexpire(keys[2], args[2]);
      END IF;
    END IF;
    -- return 1
    RETURN to_jsonb(1);
  END IF;
  -- if current == false then return -1 end
  IF current IS NULL THEN RETURN to_jsonb(-1); END IF;
  -- return 0
  RETURN to_jsonb(0);
END
$$;

-- RAISE_FENCE(KEYS = {fence}, ARGV = {token})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_raise_fence(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  current text;
BEGIN
  -- local current = redis.call('GET', KEYS[1]) or '0'
  current := coalesce(get(keys[1]), '0');
  -- if decimal_less(current, ARGV[1]) then
  IF decimal_less(current, args[1]) THEN
    -- redis.call('SET', KEYS[1], ARGV[1])
    PERFORM set(keys[1], args[1]);
    -- return 1
    RETURN to_jsonb(1);
  END IF;
  -- return 0
  RETURN to_jsonb(0);
END
$$;

-- FENCED_SET(KEYS = {data}, ARGV = {token, holder, value})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_fenced_set(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  stored text[];
BEGIN
  -- local stored = redis.call('HMGET', KEYS[1], 'fence', 'holder')
  stored := hmget(keys[1], 'fence', 'holder');
  -- if stored[1] then
  IF stored[1] IS NOT NULL THEN
    -- if decimal_less(ARGV[1], stored[1]) then return 0 end
    IF decimal_less(args[1], stored[1]) THEN RETURN to_jsonb(0); END IF;
    -- if ARGV[1] == stored[1] and (ARGV[2] == '0' or ARGV[2] ~= stored[2]) then return 0 end
    IF args[1] = stored[1] AND (args[2] = '0' OR args[2] IS DISTINCT FROM stored[2]) THEN RETURN to_jsonb(0); END IF;
  END IF;
  -- redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'holder', ARGV[2], 'value', ARGV[3])
  PERFORM hset(keys[1], 'fence', args[1], 'holder', args[2], 'value', args[3]);
  -- return 1
  RETURN to_jsonb(1);
END
$$;

-- FENCED_GET(KEYS = {data})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_fenced_get(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  fields text[];
BEGIN
  -- local fields = redis.call('HMGET', KEYS[1], 'value', 'fence')
  fields := hmget(keys[1], 'value', 'fence');
  -- if not fields[2] then return false end
  IF fields[2] IS NULL THEN RETURN 'null'::jsonb; END IF;
  -- return fields
  RETURN jsonb_build_array(fields[1], fields[2]);
END
$$;

-- STATUS(KEYS = {lock, fence, leases})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_status(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  exists_ bigint;  -- `exists` is an SQL keyword
  pttl bigint;
  counter text;
  t text[];
  now double precision;
  waiters bigint;
BEGIN
  -- local exists = redis.call('EXISTS', KEYS[1])
  exists_ := "exists"(keys[1]);
  -- local pttl = redis.call('PTTL', KEYS[1])
  pttl := pttl(keys[1]);
  -- local counter = redis.call('GET', KEYS[2]) or '0'
  counter := coalesce(get(keys[2]), '0');
  -- local t = redis.call('TIME')
  t := "time"();
  -- local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  now := tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000);
  -- local waiters = redis.call('ZCOUNT', KEYS[3], string.format('(%d', now), '+inf')
  waiters := zcount(keys[3], '(' || fmt_d(now), '+inf');
  -- return {exists, pttl, counter, waiters}
  RETURN jsonb_build_array(exists_, pttl, counter, waiters);
END
$$;

-- ANNOUNCE(KEYS = {lock, leader}, ARGV = {token, epoch, value})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_announce(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  prefix text;
  name text;
BEGIN
  -- if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
  IF get(keys[1]) IS DISTINCT FROM args[1] THEN RETURN to_jsonb(0); END IF;
  -- redis.call('SET', KEYS[2], ARGV[2] .. ' ' .. redis.sha1hex(ARGV[1]) .. ' ' .. ARGV[3])
  PERFORM set(keys[2], args[2] || ' ' || sha1hex(args[1]) || ' ' || args[3]);
  -- local prefix = string.match(KEYS[1], '^[^{]*')
  prefix := split_part(keys[1], '{', 1);
  -- local name = string.sub(KEYS[1], #prefix + 2, -2)
  name := substr(keys[1], length(prefix) + 2, greatest(length(keys[1]) - length(prefix) - 2, 0));
  -- redis.call('PUBLISH', prefix .. 'leader:' .. name, ARGV[2] .. ' ' .. ARGV[3])
  PERFORM publish(prefix || 'leader:' || name, args[2] || ' ' || args[3]);
  -- return 1
  RETURN to_jsonb(1);
END
$$;

-- LEADER(KEYS = {lock, leader})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_leader(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  token text;
  announced text;
  parts text[];
BEGIN
  -- local token = redis.call('GET', KEYS[1])
  token := get(keys[1]);
  -- local announced = redis.call('GET', KEYS[2])
  announced := get(keys[2]);
  -- if not token or not announced then return {} end
  IF token IS NULL OR announced IS NULL THEN RETURN '[]'::jsonb; END IF;
  -- local epoch, digest, value = string.match(announced, '^(%d+) (%x+) (.*)$')
  -- (Lua's `.` takes any byte, newlines too: so does `.` in a PostgreSQL ARE.)
  parts := regexp_match(announced, '^([0-9]+) ([0-9A-Fa-f]+) (.*)$');
  -- if digest ~= redis.sha1hex(token) then return {} end
  IF parts[2] IS DISTINCT FROM sha1hex(token) THEN RETURN '[]'::jsonb; END IF;
  -- return {epoch, value}
  RETURN jsonb_build_array(parts[1], parts[3]);
END
$$;

-- SEM_ACQUIRE(KEYS = {permits, fence, queue, leases, slot…},
--             ARGV = {token, ttl_ms, waiter, ticket, lease_ms, fair, permits, window_ms, counted})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_sem_acquire(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  queue text; leases text; waiter text;
  stored text;
  keep double precision;
  slots text[];
  mine text;
  chosen integer; absent integer; spare integer;
  head text;
  next_head text;
  prefix text;
  ticket double precision; position double precision; now double precision;
  retry_in double precision;
  lease_end double precision;
  left_ms bigint;  -- `left` is an SQL keyword
  i integer;
BEGIN
  -- local queue, leases, waiter = KEYS[3], KEYS[4], ARGV[3]
  queue := keys[3]; leases := keys[4]; waiter := args[3];
  -- local stored = redis.call('GET', KEYS[1])
  stored := get(keys[1]);
  -- if stored and stored ~= ARGV[7] then return {-1, stored} end
  IF stored IS NOT NULL AND stored <> args[7] THEN RETURN jsonb_build_array(-1, stored); END IF;
  -- local keep = math.max(tonumber(ARGV[2]), tonumber(ARGV[5]))
  keep := math_max(tonumber(args[2]), tonumber(args[5]));
  -- if not stored or redis.call('PTTL', KEYS[1]) < keep then
  IF stored IS NULL THEN
    -- redis.call('SET', KEYS[1], ARGV[7], 'PX', keep)
    PERFORM set(keys[1], args[7], 'PX', lua_tostring(keep));
  ELSIF pttl(keys[1]) < keep THEN
    -- redis.call('SET', KEYS[1], ARGV[7], 'PX', keep)
    PERFORM set(keys[1], args[7], 'PX', lua_tostring(keep));
  END IF;
  -- local slots = redis.call('MGET', unpack(KEYS, 5))
  slots := mget(VARIADIC keys[5:]);
  -- local mine = waiter ~= '' and 'w:' .. waiter
  mine := CASE WHEN waiter <> '' THEN 'w:' || waiter END;
  -- local chosen, absent, spare
  -- for i = 1, #slots do
  FOR i IN 1 .. cardinality(slots) LOOP
    -- if mine and slots[i] == mine then
    IF mine IS NOT NULL AND slots[i] IS NOT DISTINCT FROM mine THEN
      -- chosen = chosen or i
      chosen := coalesce(chosen, i);
    -- elseif slots[i] == false then
    ELSIF slots[i] IS NULL THEN
      -- if absent then spare = spare or i else absent = i end
      IF absent IS NOT NULL THEN spare := coalesce(spare, i); ELSE absent := i; END IF;
    END IF;
  END LOOP;
  -- local head
  -- if not chosen and absent then
  IF chosen IS NULL AND absent IS NOT NULL THEN
    -- if ARGV[6] == '1' then
    IF args[6] = '1' THEN
      -- drop_expired(queue, leases, now_ms())
      PERFORM drop_expired(queue, leases, now_ms());
      -- head = redis.call('ZRANGE', queue, 0, 0)[1]
      head := (zrange(queue, '0', '0'))[1];
      -- if head == nil or head == waiter then chosen = absent end
      IF head IS NULL OR head = waiter THEN chosen := absent; END IF;
    -- else
    ELSE
      -- chosen = absent
      chosen := absent;
    END IF;
  END IF;
  -- if chosen then
  IF chosen IS NOT NULL THEN
    -- redis.call('SET', KEYS[chosen + 4], ARGV[1], 'PX', ARGV[2])
    PERFORM set(keys[chosen + 4], args[1], 'PX', args[2]);
    -- if waiter ~= '' and ARGV[4] ~= '0' then
    IF waiter <> '' AND args[4] <> '0' THEN
      -- redis.call('ZREM', queue, waiter)
      PERFORM zrem(queue, waiter);
      -- redis.call('ZREM', leases, waiter)
      PERFORM zrem(leases, waiter);
    END IF;
    -- for i = chosen + 1, #slots do
    FOR i IN chosen + 1 .. cardinality(slots) LOOP
      -- if mine and slots[i] == mine then hand_off(KEYS[i + 4], queue, leases, ARGV[8], ARGV[9]) end
      IF mine IS NOT NULL AND slots[i] IS NOT DISTINCT FROM mine THEN
        PERFORM hand_off(keys[i + 4], queue, leases, args[8], args[9]);
      END IF;
    END LOOP;
    -- if (spare or (absent and absent ~= chosen)) then
    IF spare IS NOT NULL OR (absent IS NOT NULL AND absent <> chosen) THEN
      -- local next_head = redis.call('ZRANGE', queue, 0, 0)[1]
      next_head := (zrange(queue, '0', '0'))[1];
      -- if next_head then
      IF next_head IS NOT NULL THEN
        -- local prefix = string.match(KEYS[1], '^[^{]*')
        prefix := split_part(keys[1], '{', 1);
        -- redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(next_head, 1, 32), next_head .. ' ' .. KEYS[1])
        PERFORM publish(prefix || 'wake:' || left(next_head, 32), next_head || ' ' || keys[1]);
      END IF;
    END IF;
    -- return {1, chosen, redis.call('INCR', KEYS[2])}
    RETURN jsonb_build_array(1, chosen, lua_integer(incr(keys[2])));
  END IF;
  -- local ticket, position, now = 0, -1, now_ms()
  ticket := 0; position := -1; now := now_ms();
  -- if waiter ~= '' then
  IF waiter <> '' THEN
    -- ticket, position = enter_queue(queue, leases, waiter, tonumber(ARGV[4]), tonumber(ARGV[5]), now)
    SELECT q.ticket, q.rank INTO ticket, position
      FROM enter_queue(queue, leases, waiter, tonumber(args[4]), tonumber(args[5]), now) q;
  END IF;
  -- local retry_in = -1
  retry_in := -1;
  -- if absent then
  IF absent IS NOT NULL THEN
    -- local lease_end = head and tonumber(redis.call('ZSCORE', leases, head))
    lease_end := CASE WHEN head IS NOT NULL THEN tonumber(zscore(leases, head)) END;
    -- retry_in = lease_end and math.max(lease_end - now, 0) or 0
    retry_in := CASE WHEN lease_end IS NOT NULL THEN math_max(lease_end - now, 0) ELSE 0 END;
    -- if head then
    IF head IS NOT NULL THEN
      -- local prefix = string.match(KEYS[1], '^[^{]*')
      prefix := split_part(keys[1], '{', 1);
      -- redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(head, 1, 32), head .. ' ' .. KEYS[1])
      PERFORM publish(prefix || 'wake:' || left(head, 32), head || ' ' || keys[1]);
    END IF;
  -- elseif position == 0 or position == 1 then
  ELSIF position = 0 OR position = 1 THEN
    -- for i = 5, #KEYS do
    FOR i IN 5 .. cardinality(keys) LOOP
      -- local left = redis.call('PTTL', KEYS[i])
      left_ms := pttl(keys[i]);
      -- if left >= 0 and (retry_in < 0 or left < retry_in) then retry_in = left end
      IF left_ms >= 0 AND (retry_in < 0 OR left_ms < retry_in) THEN retry_in := left_ms; END IF;
    END LOOP;
  END IF;
  -- return {0, retry_in, ticket, position}
  RETURN jsonb_build_array(0, lua_integer(retry_in), lua_integer(ticket), lua_integer(position));
END
$$;

-- SEM_LEAVE(KEYS = {queue, leases, slot…}, ARGV = {waiter, window_ms, counted})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_sem_leave(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  slots text[];
  absent boolean;
  head text;
  passed integer;
  i integer;
BEGIN
  -- local slots = redis.call('MGET', unpack(KEYS, 3))
  slots := mget(VARIADIC keys[3:]);
  -- local absent = false
  absent := false;
  -- for i = 1, #slots do
  FOR i IN 1 .. cardinality(slots) LOOP
    -- if slots[i] == false then absent = true end
    IF slots[i] IS NULL THEN absent := true; END IF;
  END LOOP;
  -- local head
  -- if absent then head = head_then_drop(KEYS[1], KEYS[2]) end
  IF absent THEN head := head_then_drop(keys[1], keys[2]); END IF;
  -- redis.call('ZREM', KEYS[1], ARGV[1])
  PERFORM zrem(keys[1], args[1]);
  -- redis.call('ZREM', KEYS[2], ARGV[1])
  PERFORM zrem(keys[2], args[1]);
  -- local passed = 0
  passed := 0;
  -- for i = 1, #slots do
  FOR i IN 1 .. cardinality(slots) LOOP
    -- if slots[i] == 'w:' .. ARGV[1] then
    IF slots[i] IS NOT DISTINCT FROM 'w:' || args[1] THEN
      -- hand_off(KEYS[i + 2], KEYS[1], KEYS[2], ARGV[2], ARGV[3])
      PERFORM hand_off(keys[i + 2], keys[1], keys[2], args[2], args[3]);
      -- passed = passed + 1
      passed := passed + 1;
    END IF;
  END LOOP;
  -- if absent and passed == 0 then
  IF absent AND passed = 0 THEN
    -- wake_new_head(KEYS[1], head, string.sub(KEYS[1], 1, -6) .. 'permits')
    PERFORM wake_new_head(keys[1], head, left(keys[1], -5) || 'permits');
  END IF;
  -- return passed
  RETURN to_jsonb(passed);
END
$$;

-- SEM_UNDO(KEYS = {slot…}, ARGV = {token})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_sem_undo(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  slots text[];
  i integer;
BEGIN
  -- local slots = redis.call('MGET', unpack(KEYS))
  slots := mget(VARIADIC keys);
  -- for i = 1, #slots do
  FOR i IN 1 .. cardinality(slots) LOOP
    -- if slots[i] == ARGV[1] then
    IF slots[i] IS NOT DISTINCT FROM args[1] THEN
      -- redis.call('DEL', KEYS[i])
      PERFORM del(keys[i]);
      -- return 1
      RETURN to_jsonb(1);
    END IF;
  END LOOP;
  -- return 0
  RETURN to_jsonb(0);
END
$$;

-- SEM_HOLDERS(KEYS = {slot…})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_sem_holders(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  slots text[];
  held jsonb;
  i integer;
BEGIN
  -- local slots = redis.call('MGET', unpack(KEYS))
  slots := mget(VARIADIC keys);
  -- local held = {}
  held := '[]'::jsonb;
  -- for i = 1, #slots do
  FOR i IN 1 .. cardinality(slots) LOOP
    -- if slots[i] and string.sub(slots[i], 1, 2) ~= 'w:' then held[#held + 1] = i end
    IF slots[i] IS NOT NULL AND left(slots[i], 2) <> 'w:' THEN held := held || to_jsonb(i); END IF;
  END LOOP;
  -- return held
  RETURN held;
END
$$;

-- WRITE_ACQUIRE(KEYS = {write, fence, queue, leases, readers, writers},
--               ARGV = {token, ttl_ms, waiter, ticket, lease_ms, fair})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_write_acquire(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  lock text; queue text; leases text; waiter text;
  current text;
  free boolean;
  head text;
  reading boolean;
  ticket double precision; position double precision; now double precision;
  retry_in double precision;
  lease_end double precision;
  key text;
  left_ms bigint;  -- `left` is an SQL keyword
  prefix text;
BEGIN
  -- local lock, queue, leases, waiter = KEYS[1], KEYS[3], KEYS[4], ARGV[3]
  lock := keys[1]; queue := keys[3]; leases := keys[4]; waiter := args[3];
  -- local current = redis.call('GET', lock)
  current := get(lock);
  -- local free = current == false or (waiter ~= '' and current == 'w:' .. waiter)
  free := current IS NULL OR (waiter <> '' AND current = 'w:' || waiter);
  -- local head
  -- if free and current == false and ARGV[6] == '1' then
  IF free AND current IS NULL AND args[6] = '1' THEN
    -- drop_expired(queue, leases, now_ms())
    PERFORM drop_expired(queue, leases, now_ms());
    -- head = redis.call('ZRANGE', queue, 0, 0)[1]
    head := (zrange(queue, '0', '0'))[1];
    -- free = head == nil or head == waiter
    free := head IS NULL OR head = waiter;
  END IF;
  -- local reading = free and has_readers(KEYS[5])
  reading := false;
  IF free THEN reading := has_readers(keys[5]); END IF;
  -- if free and not reading then
  IF free AND NOT reading THEN
    -- redis.call('SET', lock, ARGV[1], 'PX', ARGV[2])
    PERFORM set(lock, args[1], 'PX', args[2]);
    -- if waiter ~= '' and ARGV[4] ~= '0' then
    IF waiter <> '' AND args[4] <> '0' THEN
      -- redis.call('ZREM', queue, waiter)
      PERFORM zrem(queue, waiter);
      -- redis.call('ZREM', leases, waiter)
      PERFORM zrem(leases, waiter);
      -- redis.call('ZREM', KEYS[6], waiter)
      PERFORM zrem(keys[6], waiter);
    END IF;
    -- return redis.call('INCR', KEYS[2])
    RETURN to_jsonb(lua_integer(incr(keys[2])));
  END IF;
  -- local ticket, position, now = 0, -1, now_ms()
  ticket := 0; position := -1; now := now_ms();
  -- if waiter ~= '' then
  IF waiter <> '' THEN
    -- ticket, position = enter_queue(queue, leases, waiter, tonumber(ARGV[4]), tonumber(ARGV[5]), now)
    SELECT q.ticket, q.rank INTO ticket, position
      FROM enter_queue(queue, leases, waiter, tonumber(args[4]), tonumber(args[5]), now) q;
    -- redis.call('ZADD', KEYS[6], string.format('%d', ticket), waiter)
    PERFORM zadd(keys[6], fmt_d(ticket), waiter);
    -- redis.call('PEXPIRE', KEYS[6], ARGV[5])
    PERFORM pexpire(keys[6], args[5]);
  END IF;
  -- local retry_in = -1
  retry_in := -1;
  -- if current then
  IF current IS NOT NULL THEN
    -- retry_in = redis.call('PTTL', lock)
    retry_in := pttl(lock);
  -- elseif reading then
  ELSIF reading THEN
    -- if position == 0 or position == 1 then
    IF position = 0 OR position = 1 THEN
      -- for _, key in ipairs(redis.call('SMEMBERS', KEYS[5])) do
      FOREACH key IN ARRAY smembers(keys[5]) LOOP
        -- local left = redis.call('PTTL', key)
        left_ms := pttl(key);
        -- if left >= 0 and (retry_in < 0 or left < retry_in) then retry_in = left end
        IF left_ms >= 0 AND (retry_in < 0 OR left_ms < retry_in) THEN retry_in := left_ms; END IF;
      END LOOP;
    END IF;
  -- elseif head then
  ELSIF head IS NOT NULL THEN
    -- local lease_end = tonumber(redis.call('ZSCORE', leases, head))
    lease_end := tonumber(zscore(leases, head));
    -- retry_in = lease_end and math.max(lease_end - now, 0) or 0
    retry_in := CASE WHEN lease_end IS NOT NULL THEN math_max(lease_end - now, 0) ELSE 0 END;
    -- local prefix = string.match(lock, '^[^{]*')
    prefix := split_part(lock, '{', 1);
    -- redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(head, 1, 32), head .. ' ' .. lock)
    PERFORM publish(prefix || 'wake:' || left(head, 32), head || ' ' || lock);
  END IF;
  -- return {0, retry_in, ticket, position}
  RETURN jsonb_build_array(0, lua_integer(retry_in), lua_integer(ticket), lua_integer(position));
END
$$;

-- READ_ACQUIRE(KEYS = {write, fence, queue, leases, readers, writers, reader},
--              ARGV = {token, ttl_ms, waiter, ticket, lease_ms, fair})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_read_acquire(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  lock text; queue text; leases text; writers text; waiter text;
  current text;
  reserved boolean;
  free boolean;
  blocker text;
  own_ticket double precision;  -- the inner `local ticket` of the Lua
  head text;
  prefix text;
  next_head text;
  ticket double precision; position double precision; now double precision;
  retry_in double precision;
  lease_end double precision;
BEGIN
  -- local lock, queue, leases, writers, waiter = KEYS[1], KEYS[3], KEYS[4], KEYS[6], ARGV[3]
  lock := keys[1]; queue := keys[3]; leases := keys[4]; writers := keys[6]; waiter := args[3];
  -- local current = redis.call('GET', lock)
  current := get(lock);
  -- local reserved = waiter ~= '' and current == 'w:' .. waiter
  reserved := waiter <> '' AND current IS NOT DISTINCT FROM 'w:' || waiter;
  -- local free = current == false or reserved
  free := current IS NULL OR reserved;
  -- local blocker
  -- if free and not reserved then
  IF free AND NOT reserved THEN
    -- drop_expired(queue, leases, now_ms())
    PERFORM drop_expired(queue, leases, now_ms());
    -- local ticket = waiter ~= '' and tonumber(redis.call('ZSCORE', queue, waiter)) or nil
    own_ticket := CASE WHEN waiter <> '' THEN tonumber(zscore(queue, waiter)) END;
    -- if ARGV[6] == '1' then
    IF args[6] = '1' THEN
      -- local head = redis.call('ZRANGE', queue, 0, 0)[1]
      head := (zrange(queue, '0', '0'))[1];
      -- if head ~= nil and head ~= waiter then blocker = head end
      IF head IS NOT NULL AND head <> waiter THEN blocker := head; END IF;
    -- else
    ELSE
      -- blocker = writer_ahead(queue, writers, ticket)
      blocker := writer_ahead(queue, writers, own_ticket);
    END IF;
    -- free = blocker == nil
    free := blocker IS NULL;
  END IF;
  -- local prefix = string.match(lock, '^[^{]*')
  prefix := split_part(lock, '{', 1);
  -- if free then
  IF free THEN
    -- redis.call('SET', KEYS[7], ARGV[1], 'PX', ARGV[2])
    PERFORM set(keys[7], args[1], 'PX', args[2]);
    -- redis.call('SADD', KEYS[5], KEYS[7])
    PERFORM sadd(keys[5], keys[7]);
    -- if reserved then redis.call('DEL', lock) end
    IF reserved THEN PERFORM del(lock); END IF;
    -- if waiter ~= '' and ARGV[4] ~= '0' then
    IF waiter <> '' AND args[4] <> '0' THEN
      -- redis.call('ZREM', queue, waiter)
      PERFORM zrem(queue, waiter);
      -- redis.call('ZREM', leases, waiter)
      PERFORM zrem(leases, waiter);
    END IF;
    -- local next_head = redis.call('ZRANGE', queue, 0, 0)[1]
    next_head := (zrange(queue, '0', '0'))[1];
    -- if next_head and not redis.call('ZSCORE', writers, next_head) then
    IF next_head IS NOT NULL THEN
      IF zscore(writers, next_head) IS NULL THEN
        -- redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(next_head, 1, 32), next_head .. ' ' .. lock)
        PERFORM publish(prefix || 'wake:' || left(next_head, 32), next_head || ' ' || lock);
      END IF;
    END IF;
    -- return redis.call('INCR', KEYS[2])
    RETURN to_jsonb(lua_integer(incr(keys[2])));
  END IF;
  -- local ticket, position, now = 0, -1, now_ms()
  ticket := 0; position := -1; now := now_ms();
  -- if waiter ~= '' then
  IF waiter <> '' THEN
    -- ticket, position = enter_queue(queue, leases, waiter, tonumber(ARGV[4]), tonumber(ARGV[5]), now)
    SELECT q.ticket, q.rank INTO ticket, position
      FROM enter_queue(queue, leases, waiter, tonumber(args[4]), tonumber(args[5]), now) q;
  END IF;
  -- local retry_in = -1
  retry_in := -1;
  -- if current then
  IF current IS NOT NULL THEN
    -- retry_in = redis.call('PTTL', lock)
    retry_in := pttl(lock);
  -- elseif blocker then
  ELSIF blocker IS NOT NULL THEN
    -- local lease_end = tonumber(redis.call('ZSCORE', leases, blocker))
    lease_end := tonumber(zscore(leases, blocker));
    -- retry_in = lease_end and math.max(lease_end - now, 0) or 0
    retry_in := CASE WHEN lease_end IS NOT NULL THEN math_max(lease_end - now, 0) ELSE 0 END;
    -- if ARGV[6] == '1' then
    IF args[6] = '1' THEN
      -- redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(blocker, 1, 32), blocker .. ' ' .. lock)
      PERFORM publish(prefix || 'wake:' || left(blocker, 32), blocker || ' ' || lock);
    END IF;
  END IF;
  -- return {0, retry_in, ticket, position}
  RETURN jsonb_build_array(0, lua_integer(retry_in), lua_integer(ticket), lua_integer(position));
END
$$;

-- READ_RELEASE(KEYS = {reader, write, queue, leases, readers}, ARGV = {token, window_ms, counted})
CREATE OR REPLACE FUNCTION __SCHEMA__.lua_read_release(keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  current text;
BEGIN
  -- local current = redis.call('GET', KEYS[1])
  current := get(keys[1]);
  -- if current == ARGV[1] then
  IF current IS NOT DISTINCT FROM args[1] THEN
    -- redis.call('DEL', KEYS[1])
    PERFORM del(keys[1]);
    -- redis.call('SREM', KEYS[5], KEYS[1])
    PERFORM srem(keys[5], keys[1]);
    -- if ARGV[2] ~= '0' and redis.call('EXISTS', KEYS[2]) == 0 and not has_readers(KEYS[5]) then
    IF args[2] <> '0' THEN
      IF "exists"(keys[2]) = 0 THEN
        IF NOT has_readers(keys[5]) THEN
          -- hand_off(KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3])
          PERFORM hand_off(keys[2], keys[3], keys[4], args[2], args[3]);
        END IF;
      END IF;
    END IF;
    -- return 1
    RETURN to_jsonb(1);
  END IF;
  -- if current == false then return -1 end
  IF current IS NULL THEN RETURN to_jsonb(-1); END IF;
  -- return 0
  RETURN to_jsonb(0);
END
$$;

-- ---------------------------------------------------------------------------
-- The scripts' entry points: atomic, as EVALSHA is (see the top of the file).
-- ---------------------------------------------------------------------------

-- script(name, keys, args): the atomic entry point of every script, as
-- EVALSHA is: enter_script checks the KEYS and ARGV counts (at least those of
-- the script) and takes the locks of the keys' hash tags and the frozen clock,
-- lua_<name> runs the port, leave_script clears the clock. The name is as in
-- core/src/scripts.rs, or in upper case as in the vectors; an unknown name is
-- Redis's NOSCRIPT.
CREATE OR REPLACE FUNCTION __SCHEMA__.script(name text, keys text[], args text[]) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = __SCHEMA__, pg_temp
AS $$
DECLARE
  reply jsonb;
BEGIN
  CASE lower(name)
    WHEN 'acquire' THEN
      PERFORM enter_script('acquire', keys, args, 4, 6);
      reply := lua_acquire(keys, args);
    WHEN 'release' THEN
      PERFORM enter_script('release', keys, args, 3, 3);
      reply := lua_release(keys, args);
    WHEN 'leave' THEN
      PERFORM enter_script('leave', keys, args, 3, 3);
      reply := lua_leave(keys, args);
    WHEN 'extend' THEN
      PERFORM enter_script('extend', keys, args, 1, 2);
      reply := lua_extend(keys, args);
    WHEN 'raise_fence' THEN
      PERFORM enter_script('raise_fence', keys, args, 1, 1);
      reply := lua_raise_fence(keys, args);
    WHEN 'fenced_set' THEN
      PERFORM enter_script('fenced_set', keys, args, 1, 3);
      reply := lua_fenced_set(keys, args);
    WHEN 'fenced_get' THEN
      PERFORM enter_script('fenced_get', keys, args, 1, 0);
      reply := lua_fenced_get(keys, args);
    WHEN 'status' THEN
      PERFORM enter_script('status', keys, args, 3, 0);
      reply := lua_status(keys, args);
    WHEN 'announce' THEN
      PERFORM enter_script('announce', keys, args, 2, 3);
      reply := lua_announce(keys, args);
    WHEN 'leader' THEN
      PERFORM enter_script('leader', keys, args, 2, 0);
      reply := lua_leader(keys, args);
    WHEN 'sem_acquire' THEN
      PERFORM enter_script('sem_acquire', keys, args, 5, 9);
      reply := lua_sem_acquire(keys, args);
    WHEN 'sem_leave' THEN
      PERFORM enter_script('sem_leave', keys, args, 3, 3);
      reply := lua_sem_leave(keys, args);
    WHEN 'sem_undo' THEN
      PERFORM enter_script('sem_undo', keys, args, 1, 1);
      reply := lua_sem_undo(keys, args);
    WHEN 'sem_holders' THEN
      PERFORM enter_script('sem_holders', keys, args, 1, 0);
      reply := lua_sem_holders(keys, args);
    WHEN 'write_acquire' THEN
      PERFORM enter_script('write_acquire', keys, args, 6, 6);
      reply := lua_write_acquire(keys, args);
    WHEN 'read_acquire' THEN
      PERFORM enter_script('read_acquire', keys, args, 7, 6);
      reply := lua_read_acquire(keys, args);
    WHEN 'read_release' THEN
      PERFORM enter_script('read_release', keys, args, 5, 3);
      reply := lua_read_release(keys, args);
    ELSE
      RAISE EXCEPTION 'NOSCRIPT No matching script: %', name USING ERRCODE = 'undefined_function';
  END CASE;
  PERFORM leave_script();
  RETURN reply;
END
$$;
