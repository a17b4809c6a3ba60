-- The named statements of an in-place patch of the index (schema/patch_store.py loads them; the
-- rules of indexer/rules/ run them by name through PatchStore). Each starts at a `-- name:` line;
-- `$ids`, `$names`, ... are DuckDB named parameters (lists as INTEGER[] / TEXT[]); `{EdgeKind.X}`
-- and the like are the model's vocabularies, filled in when the file is loaded.

-- ---- generic: what decides whether a patch can do, and the cascade of a removed function

-- name: meta
SELECT key, value FROM meta

-- name: repo_files
SELECT id, path, sha256, signature, registrations FROM files WHERE origin = '{Origin.REPO}'

-- name: benchmark_digests
SELECT file, sha256 FROM benchmarks

-- name: drop_reach_edges
DELETE FROM reach_edges WHERE src IN (SELECT unnest($ids::INTEGER[])) OR dst IN (SELECT unnest($ids::INTEGER[]))
RETURNING dst, src, kind, detail

-- name: drop_nodes
DELETE FROM nodes WHERE id IN (SELECT unnest($ids::INTEGER[])) RETURNING id, kind

-- name: drop_function_rows
DELETE FROM calls WHERE caller_id IN (SELECT unnest($ids::INTEGER[]));
DELETE FROM call_edges WHERE caller_id IN (SELECT unnest($ids::INTEGER[])) OR callee_id IN (SELECT unnest($ids::INTEGER[]));
DELETE FROM op_calls WHERE function_id IN (SELECT unnest($ids::INTEGER[]));
DELETE FROM native_samples WHERE function_id IN (SELECT unnest($ids::INTEGER[]));
DELETE FROM functions WHERE id IN (SELECT unnest($ids::INTEGER[]));
UPDATE kernels SET function_id = NULL WHERE function_id IN (SELECT unnest($ids::INTEGER[]));
UPDATE stub_impls SET function_id = NULL WHERE function_id IN (SELECT unnest($ids::INTEGER[]));
UPDATE library_impls SET function_id = NULL WHERE function_id IN (SELECT unnest($ids::INTEGER[]))

-- name: update_meta
INSERT OR REPLACE INTO meta SELECT unnest($keys::TEXT[]), unnest($values::TEXT[])

-- ---- files and functions (indexer/rules/files.py)

-- name: file_functions
SELECT id, qualname, name, kind, internal, usr, least_args, most_args, start_line, end_line FROM functions
 WHERE file_id = $file_id ORDER BY id

-- name: next_function_id
SELECT greatest((SELECT coalesce(max(id), -1) FROM nodes), (SELECT coalesce(max(id), -1) FROM functions)) + 1

-- name: move_functions
UPDATE functions SET start_line = moved.start_line, end_line = moved.end_line FROM
 (SELECT unnest($ids::INTEGER[]) AS id, unnest($starts::INTEGER[]) AS start_line,
 unnest($ends::INTEGER[]) AS end_line) AS moved WHERE functions.id = moved.id

-- name: linker_functions
SELECT f.id, f.file_id, f.qualname, f.name, f.kind, f.internal, fi.lang <> '{Lang.PYTHON}',
 fi.path LIKE '%.h' OR fi.path LIKE '%.hpp' OR fi.path LIKE '%.cuh', f.usr, f.least_args, f.most_args
 FROM functions f JOIN files fi ON fi.id = f.file_id WHERE f.name IN (SELECT unnest($names::TEXT[]))
 OR f.file_id IN (SELECT unnest($file_ids::INTEGER[]))
 OR f.id IN (SELECT caller_id FROM calls WHERE callee_name IN (SELECT unnest($callers_of::TEXT[])))

-- name: paths
SELECT id, path FROM files WHERE id IN (SELECT unnest($ids::INTEGER[]))

-- name: includes
SELECT file_id, target_file_id FROM includes WHERE target_file_id IS NOT NULL ORDER BY ALL

-- name: update_file
UPDATE files SET sha256 = $sha256, n_lines = $n_lines, signature = $signature, usings = $usings WHERE id = $id

-- ---- operators and kernels (indexer/rules/ops.py)

-- name: aten_ops
SELECT name, base, overload, variants FROM ops WHERE namespace = 'aten'

-- name: ops
SELECT name, base, overload FROM ops

-- ---- the functions backward formulas call (indexer/rules/formulas.py)

-- name: formula_calls
SELECT op, formula, name FROM formula_calls ORDER BY op, formula, name

-- name: functions_named
SELECT f.qualname, f.id FROM functions f JOIN files fi ON fi.id = f.file_id
 WHERE f.name IN (SELECT unnest($names::TEXT[])) AND f.kind IN (SELECT unnest($kinds::TEXT[]))
 AND fi.lang <> '{Lang.PYTHON}'

-- name: kernels
SELECT op, dispatch_key, kernel_name FROM kernels

-- name: kernels_around
SELECT dispatch_key, op FROM kernels WHERE function_id IN (SELECT unnest($ids::INTEGER[]))
UNION SELECT k.dispatch_key, k.op
 FROM kernels k SEMI JOIN call_edges c ON c.caller_id = k.function_id AND c.callee_id IN (SELECT unnest($ids::INTEGER[]))

-- ---- the class hierarchy (indexer/rules/classes.py)

-- name: class_bases
SELECT file_id, qualname, base FROM class_bases ORDER BY ALL

-- name: virtual_methods
SELECT file_id, qualname, name FROM virtual_methods ORDER BY ALL

-- ---- stubs and library registrations (indexer/rules/registrations.py)

-- name: stub_names
SELECT stub FROM stubs UNION SELECT stub FROM stub_impls

-- name: stub_impls
SELECT stub, arch, impl_name, file_id, line FROM stub_impls

-- name: library_impls
SELECT namespace, dispatch_key, op, kernel_name, file_id, line FROM library_impls

-- name: stub_impls_around
SELECT stub, arch FROM stub_impls WHERE function_id IN (SELECT unnest($ids::INTEGER[]))
UNION SELECT s.stub, s.arch
 FROM stub_impls s SEMI JOIN call_edges c ON c.caller_id = s.function_id AND c.callee_id IN (SELECT unnest($ids::INTEGER[]))

-- name: stubs_named_ops
SELECT n.key, o.key, e.detail FROM reach_edges e JOIN nodes n ON n.id = e.dst JOIN nodes o ON o.id = e.src
 WHERE e.kind = '{EdgeKind.STUB_NAME}' AND n.kind = '{NodeKind.STUB}' AND o.kind = '{NodeKind.OP}'
 AND n.key IN (SELECT unnest($stubs::TEXT[]))

-- name: stubs_called_by_kernels
SELECT n.key, k.op, k.dispatch_key FROM reach_edges e JOIN nodes n ON n.id = e.dst
 JOIN kernels k ON k.function_id = e.src
 WHERE e.kind = '{EdgeKind.STUB_CALL}' AND n.kind = '{NodeKind.STUB}' AND n.key IN (SELECT unnest($stubs::TEXT[]))

-- ---- calls (indexer/rules/calls.py)

-- name: linked_calls
SELECT * FROM calls WHERE caller_id IN (SELECT unnest($ids::INTEGER[]))

-- name: linked_call_edges
SELECT * FROM call_edges WHERE caller_id IN (SELECT unnest($ids::INTEGER[]))

-- name: linked_op_calls
SELECT * FROM op_calls WHERE function_id IN (SELECT unnest($ids::INTEGER[]))

-- name: linked_reach_edges
SELECT * FROM reach_edges WHERE src IN (SELECT unnest($ids::INTEGER[]))
 AND kind IN ('{EdgeKind.CALL}', '{EdgeKind.VIRTUAL_CALL}', '{EdgeKind.STUB_CALL}', '{EdgeKind.OP_CALL}')

-- name: unlink_calls
DELETE FROM calls WHERE caller_id IN (SELECT unnest($ids::INTEGER[]));
DELETE FROM call_edges WHERE caller_id IN (SELECT unnest($ids::INTEGER[]));
DELETE FROM op_calls WHERE function_id IN (SELECT unnest($ids::INTEGER[]))

-- name: unlink_reach_edges
DELETE FROM reach_edges WHERE src IN (SELECT unnest($ids::INTEGER[]))
 AND kind IN ('{EdgeKind.CALL}', '{EdgeKind.VIRTUAL_CALL}', '{EdgeKind.STUB_CALL}', '{EdgeKind.OP_CALL}')
 RETURNING dst, src, kind, detail

-- name: calls_named
SELECT c.caller_id, c.callee_name, c.qualifier, c.kind, c.line, c.n_args, f.file_id, fi.usings FROM calls c
 JOIN functions f ON f.id = c.caller_id JOIN files fi ON fi.id = f.file_id
 WHERE c.callee_name IN (SELECT unnest($names::TEXT[])) AND f.file_id <> $outside_file AND fi.lang <> '{Lang.PYTHON}'

-- ---- python bindings (indexer/rules/py_bindings.py)

-- name: py_bindings_of_files
SELECT file_id, line, name, symbol FROM py_bindings WHERE file_id IN (SELECT unnest($ids::INTEGER[]))

-- name: py_bindings_named
SELECT DISTINCT symbol FROM py_bindings WHERE string_split(symbol, '::')[-1] IN (SELECT unnest($names::TEXT[]))

-- ---- traces (indexer/rules/traces.py)

-- name: devices_running
SELECT DISTINCT bt.device, t.base FROM trace_ops t JOIN bench_tests bt ON bt.bench = t.bench
 AND bt.test = t.test WHERE t.namespace = 'aten' AND t.base IN (SELECT unnest($bases::TEXT[]))

-- ---- the graph (indexer/rules/graph.py)

-- name: op_and_stub_nodes
SELECT id, kind, key FROM nodes WHERE kind IN ('{NodeKind.OP}', '{NodeKind.STUB}')

-- name: next_node_id
SELECT coalesce(max(id), -1) + 1 FROM nodes

-- name: generated_layer_files
SELECT DISTINCT f.file_id FROM generated_layer g JOIN functions f ON f.id = g.function_id
