-- perfq index schema (rebuilt by `perfq index`, swapped in atomically). GENERATED from the row
-- types (schema/model.py, then the rules' own in indexer/rules/) by `python -m indexer.ddl`: edit
-- those, not this file.
-- Vocabulary follows torchgen / ATen: operators are `name.overload` (overload '' for the
-- default one), dispatch keys as in native_functions.yaml (CPU, CUDA, CompositeImplicitAutograd...).

CREATE TABLE meta (
  key VARCHAR PRIMARY KEY,
  value VARCHAR
);

CREATE TABLE files (
  id INTEGER PRIMARY KEY,
  path VARCHAR NOT NULL UNIQUE,    -- repo-relative, '/' separated
  sha256 VARCHAR NOT NULL,
  lang VARCHAR NOT NULL,           -- cpp | cuda | objcpp | python | yaml
  n_lines INTEGER NOT NULL,
  status VARCHAR NOT NULL,         -- ok | warning | skipped
  message VARCHAR,                 -- why, when status is not ok
  signature VARCHAR NOT NULL,      -- digest of the functions the file declares (not their bodies)
  registrations VARCHAR NOT NULL,  -- digest of its stubs and registrations: while it holds, an edit of the file is patched into the index instead of re-linked
  usings VARCHAR NOT NULL,         -- JSON list of its `using namespace` directives
  origin VARCHAR NOT NULL          -- repo | upstream (an out-of-tree backend's PyTorch, indexed beside it)
);

CREATE TABLE functions (
  id INTEGER NOT NULL,             -- unique by construction; no PRIMARY KEY: its index cost a full build ~0.3 s and every patch a load of the index (so for nodes.id)
  file_id INTEGER NOT NULL,
  qualname VARCHAR NOT NULL,       -- at::native::(anonymous namespace)::foo, torch.nn.functional.relu
  name VARCHAR NOT NULL,           -- last component: foo, relu
  kind VARCHAR NOT NULL,           -- function | method | template | structured_impl | structured_meta | global_kernel | macro (a function-like #define: its expansion sites call it) | registration | python | class | alias
  start_line INTEGER NOT NULL,
  end_line INTEGER NOT NULL,
  internal BOOLEAN NOT NULL,       -- internal linkage (static, anonymous namespace, _private python): same-file callers only
  usr VARCHAR NOT NULL,            -- libclang USR ('' unless parsed with compile_commands.json flags)
  least_args INTEGER NOT NULL,     -- C++: the fewest arguments a call may pass (0 unless certain: a method defined in its class, where no other declaration adds defaults)
  most_args INTEGER                -- C++: the most arguments a call may pass (NULL: no bound (a pack, '...') or unread)
);

-- Raw call sites, as written (name-level); resolved edges are in call_edges.
CREATE TABLE calls (
  caller_id INTEGER NOT NULL,
  callee_name VARCHAR NOT NULL,    -- last identifier: foo
  qualifier VARCHAR NOT NULL,      -- what stood before it: 'at', 'at::native', 'at::_ops::sum', '.', 'torch', 'F'...
  kind VARCHAR NOT NULL,           -- direct | member | address | python
  line INTEGER NOT NULL,
  n_args INTEGER                   -- C++: the arguments the call passes (NULL: not certain, or no argument list)
);

CREATE TABLE call_edges (
  caller_id INTEGER NOT NULL,
  callee_id INTEGER NOT NULL,
  kind VARCHAR NOT NULL,           -- direct | member | address | python | virtual (an override of the callee)
  line INTEGER NOT NULL
);

CREATE TABLE includes (
  file_id INTEGER NOT NULL,
  target VARCHAR NOT NULL,
  target_file_id INTEGER
);

-- The C++ class hierarchy (classes with bases or virtual methods), by what the text says: a
-- virtual call of a method reaches its overrides in the subclasses of the receiver's class
-- (call_edges kind 'virtual', reach_edges kind 'virtual_call').
CREATE TABLE class_bases (
  file_id INTEGER NOT NULL,
  qualname VARCHAR NOT NULL,
  base VARCHAR NOT NULL,
  line INTEGER NOT NULL
);

CREATE TABLE virtual_methods (
  file_id INTEGER NOT NULL,
  qualname VARCHAR NOT NULL,       -- the class
  name VARCHAR NOT NULL,           -- a method it declares virtual or override
  line INTEGER NOT NULL            -- the class's
);

CREATE TABLE ops (
  name VARCHAR PRIMARY KEY,        -- name.overload ('add.Tensor', 'relu')
  base VARCHAR NOT NULL,           -- add, relu_ -> relu_ (in-place keeps its underscore)
  overload VARCHAR NOT NULL,
  namespace VARCHAR NOT NULL,      -- aten, quantized, ...
  schema VARCHAR NOT NULL,
  structured BOOLEAN NOT NULL,
  structured_delegate VARCHAR,     -- the op whose kernel this one uses
  variants VARCHAR NOT NULL,       -- 'function, method'
  tags VARCHAR NOT NULL,
  composite VARCHAR                -- CompositeImplicitAutograd | CompositeExplicitAutograd... | NULL
);

CREATE TABLE kernels (
  op VARCHAR NOT NULL,
  dispatch_key VARCHAR NOT NULL,
  kernel_name VARCHAR NOT NULL,    -- as in the yaml: softmax_cpu_out
  function_id INTEGER              -- the indexed definition, when found
);

CREATE TABLE stubs (
  stub VARCHAR NOT NULL,           -- softmax_lastdim_kernel
  role VARCHAR NOT NULL,           -- declare | define
  file_id INTEGER NOT NULL,
  line INTEGER NOT NULL
);

CREATE TABLE stub_impls (
  stub VARCHAR NOT NULL,
  arch VARCHAR NOT NULL,           -- DEFAULT (cpu kernels, per CPU_CAPABILITY), AVX512, CUDA, HIP, MPS, XPU...
  impl_name VARCHAR NOT NULL,
  function_id INTEGER,
  file_id INTEGER NOT NULL,
  line INTEGER NOT NULL
);

CREATE TABLE library_impls (
  namespace VARCHAR NOT NULL,
  dispatch_key VARCHAR NOT NULL,   -- '' for catch-all m.impl without a key
  op VARCHAR NOT NULL,
  kernel_name VARCHAR NOT NULL,
  function_id INTEGER,
  file_id INTEGER NOT NULL,
  line INTEGER NOT NULL
);

-- A function (C++ or Python) that calls an operator through its API
-- (at::foo, at::_ops::foo::call, tensor.foo(), torch.foo, F.foo, torch.ops.aten.foo).
CREATE TABLE op_calls (
  function_id INTEGER NOT NULL,
  op VARCHAR NOT NULL,
  via VARCHAR NOT NULL,
  line INTEGER NOT NULL
);

-- op -> op: 'caller_op' is affected when 'op' is (structured_delegate, autogen, upstream_composite).
CREATE TABLE op_edges (
  op VARCHAR NOT NULL,
  caller_op VARCHAR NOT NULL,
  kind VARCHAR NOT NULL
);

CREATE TABLE benchmarks (
  name VARCHAR PRIMARY KEY,        -- file stem: softmax_test
  file VARCHAR NOT NULL,
  framework VARCHAR NOT NULL,      -- operator_benchmark | script
  tests VARCHAR NOT NULL,          -- JSON list of {name, tags, devices}
  devices VARCHAR NOT NULL,        -- JSON list
  sha256 VARCHAR NOT NULL
);

CREATE TABLE bench_ops (
  bench VARCHAR NOT NULL,
  op VARCHAR NOT NULL,
  source VARCHAR NOT NULL,         -- static | traced (test '' for traced: see trace_ops)
  test VARCHAR NOT NULL,           -- test/class name it came from ('' = whole file)
  device VARCHAR NOT NULL,         -- '' when unknown
  via VARCHAR NOT NULL             -- how: 'torch.softmax', 'F.avg_pool2d via torch.ao...'
);

-- Python functions a benchmark calls (statically), so ops reached through torch/*.py count.
CREATE TABLE bench_calls (
  bench VARCHAR NOT NULL,
  function_id INTEGER NOT NULL,
  test VARCHAR NOT NULL
);

-- Traced truth (indexer/trace.py): per benchmark file, how tracing went; per test, what ran.
CREATE TABLE traces (
  bench VARCHAR NOT NULL,
  file VARCHAR NOT NULL,
  status VARCHAR NOT NULL,         -- ok | partial | failed
  reason VARCHAR NOT NULL,         -- why, when not ok
  seconds DOUBLE NOT NULL,
  max_rss_mb INTEGER NOT NULL,
  torch VARCHAR NOT NULL           -- torch version it was traced with
);

CREATE TABLE bench_tests (
  id INTEGER NOT NULL,             -- numbered by bench, test, module, device, mode, kernels_seen
  bench VARCHAR NOT NULL,
  test VARCHAR NOT NULL,           -- the framework's test name: add_M8_N32_K256_cuda
  module VARCHAR NOT NULL,         -- its --operators name: add
  class VARCHAR NOT NULL,          -- AddBenchmark
  tag VARCHAR NOT NULL,            -- short | long | ...
  backward BOOLEAN NOT NULL,
  device VARCHAR NOT NULL,         -- as configured (cuda/xpu tests are traced on the CPU)
  mode VARCHAR NOT NULL,           -- real | meta | fake | inferred | sampled
  kernels_seen BOOLEAN NOT NULL    -- its ops include those kernels call (real, or borrowed from its module's real tests)
);

-- Operators a test's timed region executes (any overload): aten ops by base name, others too;
-- layout: dense | quantized (run on quantized tensors: its QuantizedCPU/... kernels, not the dense ones).
-- inferred: '' when the trace saw the operator run; else why it is taken to run (inside an
-- upstream operator in a small CPU run; called by the repo's own kernel for the test's device).
-- in_kernel: true when the operator ran only inside other operators' kernels (never called from Python
-- or inside composite operators): torch.compile's graph does not hold it (a lowering of it is not run).
CREATE TABLE trace_ops (
  bench VARCHAR NOT NULL,
  test VARCHAR NOT NULL,
  namespace VARCHAR NOT NULL,
  base VARCHAR NOT NULL,
  layout VARCHAR NOT NULL,
  inferred VARCHAR NOT NULL,
  in_kernel BOOLEAN NOT NULL
);

-- The dtypes a test's operators ran on (indexer/rules/traces.py): the torch dtypes of each call's
-- tensor arguments (int32, bfloat16, quint8), per layout; the dispatch key is the layout's on the test's device.
CREATE TABLE trace_dtypes (
  bench VARCHAR NOT NULL,
  test VARCHAR NOT NULL,
  namespace VARCHAR NOT NULL,
  base VARCHAR NOT NULL,
  layout VARCHAR NOT NULL,
  dtype VARCHAR NOT NULL
);

-- Python line truth (indexer/trace_driver.py: sys.settrace per test): the lines of the benchmark
-- tree's shared modules (harness, configs) and of torch's own Python that each traced test ran
-- (its build and its timed region; shapes-only tests leave out fake-tensor machinery). Tests that
-- ran the same lines of a file share one line set.
CREATE TABLE py_line_sets (
  line_set INTEGER NOT NULL,
  path VARCHAR NOT NULL,
  line INTEGER NOT NULL
);

-- The line set of each traced test and file (py_line_sets).
CREATE TABLE py_test_lines (
  bench VARCHAR NOT NULL,
  test VARCHAR NOT NULL,
  line_set INTEGER NOT NULL
);

-- Per torch file the tests ran, each line's digest (crc32 of its stripped text, 31 bits) in the
-- traced torch: it is not the indexed source, so a changed line is trusted only where texts match.
CREATE TABLE py_line_texts (
  path VARCHAR NOT NULL,
  line INTEGER NOT NULL,
  digest INTEGER NOT NULL
);

-- Native truth (`perfq index --native`, indexer/native.py): per sampled test, the index functions
-- on its perf stacks (cpu-clock samples of libtorch_cpu.so) and the share of its samples holding each.
CREATE TABLE native_samples (
  bench VARCHAR NOT NULL,
  test VARCHAR NOT NULL,
  function_id INTEGER NOT NULL,
  share DOUBLE NOT NULL            -- of the test's samples (0..1), stored from 0.01
);

-- Every test sampled, with its samples in the library and those that map to index functions: a
-- test none of whose frames map (a oneDNN fast path runs outside the indexed sources) was still
-- observed, and a static chain its stacks never show is "static, not observed".
CREATE TABLE native_tests (
  bench VARCHAR NOT NULL,
  test VARCHAR NOT NULL,
  samples INTEGER NOT NULL,
  mapped INTEGER NOT NULL
);

CREATE TABLE canary_sets (
  name VARCHAR PRIMARY KEY,
  description VARCHAR,
  paths VARCHAR,
  functions VARCHAR,
  benchmarks VARCHAR
);

-- Precomputed reachability graph over nodes (functions, stubs, ops, benchmarks):
-- 'src' is affected when 'dst' changes. Queries walk it from changed functions.
CREATE TABLE nodes (
  id INTEGER NOT NULL,
  kind VARCHAR NOT NULL,
  key VARCHAR NOT NULL,
  label VARCHAR NOT NULL
);

CREATE TABLE reach_edges (
  dst INTEGER NOT NULL,
  src INTEGER NOT NULL,
  kind VARCHAR NOT NULL,
  detail VARCHAR NOT NULL
);

-- The same graph packed for queries (indexer/graph.py): edges by dst as arrays, one row per part.
CREATE TABLE graph (
  part VARCHAR PRIMARY KEY,
  data BLOB NOT NULL
);

CREATE TABLE warnings (
  file VARCHAR,
  phase VARCHAR NOT NULL,
  message VARCHAR NOT NULL
);

-- Preprocessor branches of a C++ file the index does not see (#if 0; the later branches of a
-- group whose branches leave braces unbalanced): no function or call inside one is indexed.
CREATE TABLE unseen_branches (
  file_id INTEGER NOT NULL,
  first_line INTEGER NOT NULL,     -- the branch's first line, after its directive
  last_line INTEGER NOT NULL,      -- its last line, before the next directive
  directive VARCHAR NOT NULL       -- the directive that opens it: '#if 0', '#else', '#elif defined(X)'
);

-- The names derivatives.yaml's backward formulas call, per operator whose backward runs them
-- (the functions each resolves to are the ``formula`` reach edges into them).
CREATE TABLE formula_calls (
  op VARCHAR NOT NULL,             -- the operator whose backward runs the formula: addmm, add.Tensor
  formula VARCHAR NOT NULL,        -- the derivatives.yaml entry's name: addmm, add.Tensor
  name VARCHAR NOT NULL            -- the name called, as written: mm_mat1_backward, at::sum_to
);

-- C++ functions a file binds to Python names (entries of CPython ``PyMethodDef`` tables,
-- pybind11 ``def``s): Python code calling the name in an extension module calls the function.
CREATE TABLE py_bindings (
  file_id INTEGER NOT NULL,
  line INTEGER NOT NULL,           -- the line of the table entry or ``def``
  name VARCHAR NOT NULL,           -- the Python name: '_has_torch_function_unary'
  symbol VARCHAR NOT NULL          -- the C++ function as written there: 'THPModule_has_torch_function_unary', 'Cls::method'
);

-- A C++ function every generated operator wrapper runs: named by a template or generator
-- (depth 0) or called by one so named (depth 1).
CREATE TABLE generated_layer (
  function_id INTEGER NOT NULL,
  source VARCHAR NOT NULL,         -- the template or generator file whose C++ names it: tools/autograd/templates/VariableType.cpp
  line INTEGER NOT NULL,           -- the line of that file
  named VARCHAR NOT NULL,          -- the name written there: at::AutoDispatchBelowADInplaceOrView
  depth INTEGER NOT NULL           -- 0: the named function (a class's constructor); 1: one it calls
);
