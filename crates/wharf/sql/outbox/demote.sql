-- Takes the claim hint off due ADMITTED actions that wait behind an earlier unstarted action of
-- their lane, so later claims stop looking at them.
--
-- Safe against that earlier action leaving meanwhile: the blocker is the lane's first unstarted
-- action, and a demotion only happens while this statement holds a share lock on it in an
-- unstarted state; its departure (whose trigger promotes the lane's next action) therefore
-- comes after this statement commits. Never waits: a locked blocker or a locked target is
-- skipped, so demotions cannot deadlock with each other, with claims or with the promotion
-- trigger. A lane's first unstarted action is never a demotion target, so the share-locked
-- rows and the updated rows are disjoint.
-- $1 integer: look at most at this many candidates.
-- $2 timestamptz: "now" for tests; NULL means the database clock.
WITH clock AS MATERIALIZED (
    SELECT coalesce($2::timestamptz, now()) AS now
),
blocked AS (
    SELECT c.id,
           (SELECT p.id FROM wharf.action p
             WHERE p.lane_key = c.lane_key AND p.state IN ('PROPOSED', 'ADMITTED') AND p.id < c.id
             ORDER BY p.id LIMIT 1) AS blocker
      FROM (SELECT a.id, a.lane_key
              FROM wharf.action a, clock
             WHERE a.state = 'ADMITTED' AND a.head_hint AND a.run_at <= clock.now
             ORDER BY a.run_at, a.id
             LIMIT $1) c
),
held AS (
    SELECT p.id
      FROM wharf.action p
     WHERE p.id IN (SELECT blocker FROM blocked WHERE blocker IS NOT NULL)
       AND p.state IN ('PROPOSED', 'ADMITTED')
       FOR SHARE SKIP LOCKED
),
targets AS (
    SELECT n.id
      FROM wharf.action n
      JOIN blocked b ON b.id = n.id
      JOIN held h ON h.id = b.blocker
     WHERE n.state = 'ADMITTED' AND n.head_hint
       FOR UPDATE OF n SKIP LOCKED
)
UPDATE wharf.action n
   SET head_hint = false
  FROM targets t
 WHERE n.id = t.id
