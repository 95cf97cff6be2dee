// graphmem: saved Cypher queries for Neo4j Browser.
//
// Every query is parameterised. Set the parameters once per Browser session (edit the values),
// then run any query below; star one to keep it in your Favorites. See GUIDE.md beside this file.
//
//   :params {namespace: 'demo', taskId: 'task-soup', episodeId: 'ep-soup-2', memoryId: 'proc-soup-v2', limit: 10, words: 'soup'}
//
// or one at a time:   :param namespace => 'demo'
//
// Each query starts with a "// name:" line, then "// params:" and a description, and ends with
// a semicolon. Queries marked "view: graph" draw a graph; "view: table" give a table.


// name: Namespaces and what they hold
// params: (none)
// view: table
// Start here: every namespace, with how many memories of each kind it holds and their mean Q.
MATCH (m:Memory)
WITH m.namespace AS namespace, m.kind AS kind, count(*) AS n, avg(m.q) AS meanQ
ORDER BY namespace, kind
RETURN namespace,
       collect(kind + ': ' + toString(n)) AS memories,
       round(sum(meanQ * n) / sum(n), 3) AS mean_q
ORDER BY namespace;


// name: Find a task by words
// params: namespace, words, limit
// view: table
// Full-text search (index memory_text) over tasks, procedures and tips, to find the ids the
// other queries take. Lucene syntax: words, "a phrase", soup~ (fuzzy), hea* (prefix).
CALL db.index.fulltext.queryNodes('memory_text', $words) YIELD node, score
WHERE node.namespace = $namespace AND (node:Task OR node:Procedure OR node:Tip)
RETURN node.kind AS kind, node.id AS id,
       coalesce(node.text, node.task_text) AS text,
       round(node.q, 3) AS q, node.obsolete AS obsolete, round(score, 2) AS match
ORDER BY match DESC, q DESC
LIMIT toInteger($limit);


// name: Procedural chain of a task
// params: namespace, taskId
// view: graph
// The task, every procedure that SOLVED_BY it with its steps in order (FIRST_STEP, NEXT...),
// scripts DISTILLED_FROM trajectories, tips ABOUT the task or its procedures, and the
// EVOLVED_FROM / SUPERSEDES / LINKS_TO edges around the procedures.
MATCH (t:Task {namespace: $namespace, id: $taskId})
OPTIONAL MATCH chain = (t)-[:SOLVED_BY]->(:Procedure)-[:FIRST_STEP]->(:Step)-[:NEXT*0..200]->(:Step)
WITH t, collect(chain) AS chains
OPTIONAL MATCH solved = (t)-[:SOLVED_BY]->(p:Procedure)
WITH t, chains, collect(solved) AS procedures, collect(p) AS ps
UNWIND [t] + ps AS target
OPTIONAL MATCH tip = (:Tip)-[:ABOUT]->(target)
WITH t, chains, procedures, ps, collect(tip) AS tips
UNWIND CASE WHEN size(ps) = 0 THEN [null] ELSE ps END AS p
OPTIONAL MATCH around = (p)-[:DISTILLED_FROM|EVOLVED_FROM|SUPERSEDES|LINKS_TO]-(:Memory)
RETURN t, procedures, chains, tips, collect(around) AS evolution;


// name: The steps of a task's procedures, in order
// params: namespace, taskId
// view: table
// One row per step: which procedure, whether it worked, and the thought / action / observation.
MATCH (t:Task {namespace: $namespace, id: $taskId})-[s:SOLVED_BY]->(p:Procedure)
OPTIONAL MATCH (p)-[:FIRST_STEP]->(:Step)-[:NEXT*0..200]->(step:Step)
RETURN p.id AS procedure, p.granularity AS granularity, p.success AS success,
       round(p.q, 3) AS q, p.obsolete AS obsolete,
       step.index AS step, step.thought AS thought, step.action AS action,
       step.observation AS observation, p.script AS script
ORDER BY p.obsolete, p.q DESC, procedure, step;


// name: What an episode retrieved, and why
// params: namespace, episodeId
// view: table
// Each memory handed to the agent, best first, with the parts of its score:
// score = (1-lambda) * z(sim) + lambda * z(Q). q_after is Q right after the episode's reward
// was credited (Q <- Q + alpha (R - Q)); q_now is Q today.
MATCH (e:Episode {namespace: $namespace, id: $episodeId})-[r:RETRIEVED]->(m:Memory)
RETURN r.rank AS rank, m.kind AS kind, m.id AS id,
       coalesce(m.text, m.task_text, m.content, m.action) AS memory,
       round(r.sim, 3) AS sim, round(r.z_sim, 3) AS z_sim,
       round(r.q, 3) AS q_at_retrieval, round(r.z_q, 3) AS z_q,
       round(r.score, 3) AS score, r.explored AS explored,
       e.reward AS reward, round(r.q_after, 3) AS q_after, round(m.q, 3) AS q_now
ORDER BY rank;


// name: What an episode retrieved (graph)
// params: namespace, episodeId
// view: graph
// The episode, the memories it RETRIEVED (edge captions show rank, score and Q) and, for
// retrieved procedures, the task they solved.
MATCH (e:Episode {namespace: $namespace, id: $episodeId})
OPTIONAL MATCH retrieved = (e)-[:RETRIEVED]->(m:Memory)
WITH e, collect(retrieved) AS retrieved, collect(m) AS ms
UNWIND CASE WHEN size(ms) = 0 THEN [null] ELSE ms END AS m
OPTIONAL MATCH solved = (:Task)-[:SOLVED_BY]->(m:Procedure)
RETURN e, retrieved, collect(solved) AS tasks;


// name: Top-utility procedures in a namespace
// params: namespace, limit
// view: table
// The procedures that proved most useful: highest learned Q first (obsolete ones left out),
// with how often they were used and succeeded.
MATCH (p:Procedure {namespace: $namespace})
WHERE NOT coalesce(p.obsolete, false)
OPTIONAL MATCH (t:Task)-[:SOLVED_BY]->(p)
RETURN p.id AS id, p.task_text AS task, p.granularity AS granularity,
       round(p.q, 3) AS q, p.q_updates AS q_updates, p.uses AS uses, p.successes AS successes,
       CASE WHEN p.uses > 0 THEN round(toFloat(p.successes) / p.uses, 2) END AS success_rate,
       p.success AS built_from_success, collect(t.id) AS tasks
ORDER BY q DESC, uses DESC, id
LIMIT toInteger($limit);


// name: Top-utility procedures in every namespace
// params: limit
// view: table
// The same ranking, the best few of each namespace side by side.
MATCH (p:Procedure)
WHERE NOT coalesce(p.obsolete, false)
WITH p ORDER BY p.q DESC, p.uses DESC, p.id
WITH p.namespace AS namespace, collect(p)[..toInteger($limit)] AS top
UNWIND top AS p
RETURN namespace, p.id AS id, p.task_text AS task, round(p.q, 3) AS q, p.uses AS uses,
       p.successes AS successes
ORDER BY namespace, q DESC, id;


// name: Evolution chains in a namespace
// params: namespace, limit
// view: graph
// Start here for evolution: the memories that were refined most, each newest version with its
// EVOLVED_FROM chain back to the first version (longest chains first; edge captions say what
// changed). Consolidated fact notes, corrected procedures and notes refreshed by evolve.
MATCH chain = (newest:Memory {namespace: $namespace})-[:EVOLVED_FROM*1..50]->(first:Memory)
WHERE NOT EXISTS { MATCH (:Memory)-[:EVOLVED_FROM]->(newest) }
  AND NOT EXISTS { MATCH (first)-[:EVOLVED_FROM]->(:Memory) }
RETURN chain
ORDER BY length(chain) DESC, newest.id
LIMIT toInteger($limit);


// name: Version chains in a namespace
// params: namespace, limit
// view: table
// The same chains as a table: the newest version, how many versions it has, and the change
// each version made, oldest first. Pass an id to "Evolution history of a memory" for more.
MATCH chain = (newest:Memory {namespace: $namespace})-[:EVOLVED_FROM*1..50]->(first:Memory)
WHERE NOT EXISTS { MATCH (:Memory)-[:EVOLVED_FROM]->(newest) }
  AND NOT EXISTS { MATCH (first)-[:EVOLVED_FROM]->(:Memory) }
RETURN newest.id AS newest, newest.kind AS kind, newest.version AS version,
       length(chain) + 1 AS versions, newest.obsolete AS obsolete,
       coalesce(newest.content, newest.task_text, newest.text) AS memory,
       reverse([r IN relationships(chain) | r.change]) AS changes, first.id AS first
ORDER BY versions DESC, newest
LIMIT toInteger($limit);


// name: Evolution history of a memory
// params: namespace, memoryId
// view: graph
// Every version of a memory (EVOLVED_FROM / SUPERSEDES, both ways, any depth), the tips ABOUT
// its versions, and its LINKS_TO neighbours.
MATCH (m:Memory {namespace: $namespace, id: $memoryId})
OPTIONAL MATCH versions = (m)-[:EVOLVED_FROM|SUPERSEDES*1..50]-(:Memory)
WITH m, collect(versions) AS versions
OPTIONAL MATCH (m)-[:EVOLVED_FROM|SUPERSEDES*0..50]-(v:Memory)
WITH m, versions, collect(DISTINCT v) AS vs
UNWIND vs AS version
OPTIONAL MATCH tip = (:Tip)-[:ABOUT]->(version)
WITH m, versions, collect(tip) AS tips
OPTIONAL MATCH link = (m)-[:LINKS_TO]-(:Memory)
RETURN m, versions, tips, collect(link) AS links;


// name: Version timeline of a memory
// params: namespace, memoryId
// view: table
// The same history as a table, oldest first: which version replaced which, why, and how Q
// compares across versions.
MATCH (m:Memory {namespace: $namespace, id: $memoryId})
MATCH (m)-[:EVOLVED_FROM|SUPERSEDES*0..50]-(v:Memory)
WITH DISTINCT v
OPTIONAL MATCH (v)-[ev:EVOLVED_FROM]->(older:Memory)
OPTIONAL MATCH (v)-[:SUPERSEDES]->(replaced:Memory)
RETURN v.id AS id, v.kind AS kind, v.version AS version, v.created_at AS created_at,
       round(v.q, 3) AS q, v.obsolete AS obsolete, v.obsolete_reason AS obsolete_reason,
       collect(DISTINCT older.id) AS evolved_from, collect(DISTINCT ev.change) AS change,
       collect(DISTINCT replaced.id) AS supersedes
ORDER BY created_at, id;


// name: How a memory's Q moved, episode by episode
// params: namespace, memoryId
// view: table
// Every finished episode that retrieved the memory, oldest first: its reward, the memory's rank
// then, and Q before and after the update.
MATCH (e:Episode)-[r:RETRIEVED]->(m:Memory {namespace: $namespace, id: $memoryId})
WHERE e.status = 'finished'
RETURN e.finished_at AS finished_at, e.id AS episode, e.task_text AS task, e.reward AS reward,
       e.success AS success, r.rank AS rank, round(r.q, 3) AS q_before,
       round(r.q_after, 3) AS q_after, r.alpha AS alpha
ORDER BY finished_at, episode;


// name: Tips learned from failures
// params: namespace, limit
// view: table
// Reflections written after failed attempts (tips ABOUT a failed procedure, or "avoid" tips),
// with the task, the failed procedure, and the procedures that later replaced it.
MATCH (tip:Tip {namespace: $namespace})-[:ABOUT]->(target:Memory)
WITH tip, collect(target) AS targets
WHERE tip.polarity = 'avoid' OR any(t IN targets WHERE t:Procedure AND t.success = false)
UNWIND targets AS target
OPTIONAL MATCH (task:Task)-[:SOLVED_BY]->(target)
OPTIONAL MATCH (fix:Procedure)-[:EVOLVED_FROM|SUPERSEDES]->(target)
WITH tip, collect(DISTINCT target.id) AS about,
     collect(DISTINCT coalesce(task.text, target.text, target.task_text)) AS tasks,
     collect(DISTINCT fix.id) AS replaced_by
RETURN tip.id AS id, tip.text AS tip, tip.polarity AS polarity, round(tip.q, 3) AS q,
       about, tasks, replaced_by
ORDER BY q DESC, id
LIMIT toInteger($limit);


// name: From failure to tip to fix
// params: namespace, limit
// view: graph
// Each lesson a failure taught, newest first: the tip, the episode whose failure produced it,
// what the tip is ABOUT (the task, the procedures the failing run followed, or a failed
// attempt) and the procedures that later replaced those (EVOLVED_FROM / SUPERSEDES).
MATCH (tip:Tip {namespace: $namespace})
WITH tip ORDER BY tip.created_at DESC LIMIT $limit
MATCH lesson = (tip)-[about:ABOUT]->(target:Memory)
OPTIONAL MATCH (failure:Episode {namespace: $namespace, id: coalesce(about.episode, tip.source_ref)})
OPTIONAL MATCH fix = (:Procedure)-[:EVOLVED_FROM|SUPERSEDES]->(target)
RETURN tip, collect(DISTINCT lesson) AS lessons, collect(DISTINCT failure) AS failures,
       collect(DISTINCT fix) AS fixes;


// name: Facts that changed
// params: namespace, limit
// view: table
// Notes a newer note updates (an UPDATES edge, found when the newer one was written: the same
// subject, said later), newest change first. The older note is kept and still retrieved;
// retrieval ranks the newer one right above it.
MATCH (old:Note {namespace: $namespace})<-[u:UPDATES]-(new:Note)
RETURN old.id AS older, old.content AS was, toString(old.valid_at) AS stated,
       new.id AS newer, new.content AS now, toString(new.valid_at) AS restated,
       u.subject AS subject, u.sim AS sim, new.id = old.updated_by AS ranks_above
ORDER BY restated DESC, older
LIMIT toInteger($limit);
