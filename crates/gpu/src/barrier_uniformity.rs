//! Every workgroup barrier in control flow that is the same for a whole workgroup, checked without a device.
//!
//! Vulkan asks that a workgroup's invocations all reach each `workgroupBarrier` (`OpControlBarrier`) together,
//! in control flow that is uniform across the workgroup; past that the behaviour is undefined: a GPU may hang or
//! let invocations through unsynchronised. lavapipe lets it pass, and naga 30 does not check it (its uniformity
//! analysis holds only derivatives to uniform control flow, and it counts every function-local variable as
//! non-uniform, which would flag every loop with a barrier in it). This analysis is the stricter one a kernel
//! generator needs: a value is uniform across a workgroup when it comes from literals, constants and overrides,
//! `workgroup_id`, `num_workgroups`, uniform buffers, read-only storage read at uniform indices, `arrayLength`,
//! `workgroupUniformLoad`, function-local variables only ever stored uniform values in uniform control flow (a
//! fixpoint), and calls of functions whose result is uniform for uniform arguments. Control flow is divergent under
//! an `if` or `switch` on a non-uniform value, in a loop any invocation may leave on its own (a `break`, `continue`
//! or `return` in divergent flow, a non-uniform `break if`), and after a `return` in divergent flow. A barrier, a
//! `workgroupUniformLoad`, or a call of a function that holds one, in divergent control flow is an error naming the
//! entry point and the source line.

use std::collections::{HashMap, HashSet};

use naga::{
    AddressSpace, Binding, Block, BuiltIn, Expression, Function, Handle, Module, Statement,
    StorageAccess, TypeInner,
};

/// What [`check`] found: the first barrier in divergent control flow, as a message naming the entry point.
pub(crate) fn check(module: &Module, source: &str) -> Result<(), String> {
    let mut barriers = HashMap::new();
    for (h, f) in module.functions.iter() {
        has_barrier(module, f, &mut barriers, Some(h));
    }
    for ep in &module.entry_points {
        let args: Vec<bool> = ep
            .function
            .arguments
            .iter()
            .map(|a| uniform_binding(a.binding.as_ref()))
            .collect();
        let mut a = Analysis {
            module,
            f: &ep.function,
            args: &args,
            struct_args: struct_member_uniformity(module, &ep.function),
            barriers: &barriers,
            locals: HashSet::new(),
            results: HashMap::new(),
            memo: HashMap::new(),
            errors: Vec::new(),
            nonuniform_return: false,
        };
        if let Some(span) = a.run() {
            let line = span
                .map(|s| format!(" (line {})", s.location(source).line_number))
                .unwrap_or_default();
            return Err(format!(
                "entry point `{}`: a workgroup barrier{line} in control flow that may differ between the invocations \
                 of a workgroup (Vulkan leaves it undefined: a GPU may hang there); hoist it out of the branch or loop, \
                 or make the condition uniform (workgroupUniformLoad)",
                ep.name
            ));
        }
    }
    Ok(())
}

/// Whether an entry point's argument bound so is the same for every invocation of a workgroup.
fn uniform_binding(b: Option<&Binding>) -> bool {
    matches!(
        b,
        Some(Binding::BuiltIn(
            BuiltIn::WorkGroupId | BuiltIn::NumWorkGroups | BuiltIn::WorkGroupSize
        ))
    )
}

/// For each struct argument of an entry point, each member's uniformity.
fn struct_member_uniformity(module: &Module, f: &Function) -> HashMap<u32, Vec<bool>> {
    f.arguments
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match &module.types[a.ty].inner {
            TypeInner::Struct { members, .. } => Some((
                i as u32,
                members
                    .iter()
                    .map(|m| uniform_binding(m.binding.as_ref()))
                    .collect(),
            )),
            _ => None,
        })
        .collect()
}

/// Whether `f` holds a barrier (or calls a function that does), memoised by function.
fn has_barrier(
    module: &Module,
    f: &Function,
    memo: &mut HashMap<Handle<Function>, bool>,
    me: Option<Handle<Function>>,
) -> bool {
    if let Some(h) = me
        && let Some(&b) = memo.get(&h)
    {
        return b;
    }
    let mut found = false;
    crate::rewrite::each_block(&f.body, &mut |b| {
        for s in b.iter() {
            match s {
                Statement::ControlBarrier(_) | Statement::WorkGroupUniformLoad { .. } => {
                    found = true
                }
                Statement::Call { function, .. } => {
                    let callee = &module.functions[*function];
                    if has_barrier(module, callee, memo, Some(*function)) {
                        found = true;
                    }
                }
                _ => {}
            }
        }
    });
    if let Some(h) = me {
        memo.insert(h, found);
    }
    found
}

/// How a block's flow can leave it unevenly: some invocations leaving the innermost loop (`loop_exit`) or the
/// function (`fn_exit`) where others go on.
#[derive(Clone, Copy, Default)]
struct Exits {
    loop_exit: bool,
    fn_exit: bool,
    /// Some invocations leaving the innermost `switch` case.
    case_exit: bool,
}

impl Exits {
    fn any(self) -> bool {
        self.loop_exit || self.fn_exit || self.case_exit
    }

    fn or(self, o: Self) -> Self {
        Self {
            loop_exit: self.loop_exit || o.loop_exit,
            fn_exit: self.fn_exit || o.fn_exit,
            case_exit: self.case_exit || o.case_exit,
        }
    }
}

struct Analysis<'a> {
    module: &'a Module,
    f: &'a Function,
    /// Each argument's uniformity.
    args: &'a [bool],
    /// A struct argument's members' uniformity.
    struct_args: HashMap<u32, Vec<bool>>,
    barriers: &'a HashMap<Handle<Function>, bool>,
    /// Local variables that may hold different values in different invocations.
    locals: HashSet<Handle<naga::LocalVariable>>,
    /// The uniformity of values statements define (calls', atomics', workgroupUniformLoad's results).
    results: HashMap<Handle<Expression>, bool>,
    memo: HashMap<Handle<Expression>, bool>,
    /// Barriers found in divergent control flow (their span, where known).
    errors: Vec<Option<naga::Span>>,
    /// A value returned in divergent flow or not uniform: the result of a call may differ between invocations.
    nonuniform_return: bool,
}

impl Analysis<'_> {
    /// Walks the function until the non-uniform locals settle; the first barrier in divergent flow, if any.
    fn run(&mut self) -> Option<Option<naga::Span>> {
        loop {
            let before = self.locals.len();
            self.memo.clear();
            self.errors.clear();
            self.nonuniform_return = false;
            self.block(&self.f.body, false, false);
            if self.locals.len() == before {
                return self.errors.first().copied();
            }
        }
    }

    /// Whether `e` has one value across the workgroup.
    fn uniform(&mut self, e: Handle<Expression>) -> bool {
        if let Some(&u) = self.memo.get(&e) {
            return u;
        }
        use Expression as E;
        let f = self.f;
        let u = match f.expressions[e] {
            E::Literal(_) | E::Constant(_) | E::Override(_) | E::ZeroValue(_) => true,
            E::GlobalVariable(_) | E::LocalVariable(_) => true, // the pointer; what it points at is `Load`'s
            E::FunctionArgument(i) => self.args.get(i as usize).copied().unwrap_or(false),
            E::AccessIndex { base, index } => match f.expressions[base] {
                E::FunctionArgument(i) if self.struct_args.contains_key(&i) => self.struct_args[&i]
                    .get(index as usize)
                    .copied()
                    .unwrap_or(false),
                _ => self.uniform(base),
            },
            E::Load { pointer } => self.load_uniform(pointer),
            E::ArrayLength(_) => true,
            E::CallResult(_)
            | E::AtomicResult { .. }
            | E::WorkGroupUniformLoadResult { .. }
            | E::SubgroupBallotResult
            | E::SubgroupOperationResult { .. } => self.results.get(&e).copied().unwrap_or(false),
            E::Access { base, index } => self.uniform(base) && self.uniform(index),
            E::Splat { value, .. } => self.uniform(value),
            E::Swizzle { vector, .. } => self.uniform(vector),
            E::Compose { ref components, .. } => components.iter().all(|&c| self.uniform(c)),
            E::Unary { expr, .. } => self.uniform(expr),
            E::Binary { left, right, .. } => self.uniform(left) && self.uniform(right),
            E::Select {
                condition,
                accept,
                reject,
            } => self.uniform(condition) && self.uniform(accept) && self.uniform(reject),
            E::Relational { argument, .. } => self.uniform(argument),
            E::Math {
                arg,
                arg1,
                arg2,
                arg3,
                ..
            } => [Some(arg), arg1, arg2, arg3]
                .into_iter()
                .flatten()
                .all(|a| self.uniform(a)),
            E::As { expr, .. } => self.uniform(expr),
            E::ImageQuery { .. } => true,
            // Texel loads, samples, derivatives, ray queries: not relied on for control flow here.
            _ => false,
        };
        self.memo.insert(e, u);
        u
    }

    /// Whether a load through `pointer` gives one value across the workgroup.
    fn load_uniform(&mut self, pointer: Handle<Expression>) -> bool {
        use Expression as E;
        // The chain of accesses down to the variable; each index must be uniform.
        let f = self.f;
        let mut p = pointer;
        loop {
            match f.expressions[p] {
                E::Access { base, index } => {
                    if !self.uniform(index) {
                        return false;
                    }
                    p = base;
                }
                E::AccessIndex { base, .. } => p = base,
                E::LocalVariable(v) => return !self.locals.contains(&v),
                E::GlobalVariable(g) => {
                    return match self.module.global_variables[g].space {
                        AddressSpace::Uniform | AddressSpace::Immediate => true,
                        AddressSpace::Storage { access } => !access.contains(StorageAccess::STORE),
                        // Workgroup memory holds what each invocation stored (workgroupUniformLoad is the
                        // uniform read); private memory is each invocation's own.
                        _ => false,
                    };
                }
                E::FunctionArgument(_) => return false, // a pointer argument: what it points at is unknown
                _ => return false,
            }
        }
    }

    /// The local variable a pointer expression stores into, if any.
    fn local_root(&self, pointer: Handle<Expression>) -> Option<Handle<naga::LocalVariable>> {
        let mut p = pointer;
        loop {
            match self.f.expressions[p] {
                Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => p = base,
                Expression::LocalVariable(v) => return Some(v),
                _ => return None,
            }
        }
    }

    /// Walks `block` with control flow divergent (`div`) or not; `in_switch`: a `break` here leaves a switch.
    fn block(&mut self, block: &Block, mut div: bool, in_switch: bool) -> Exits {
        let mut out = Exits::default();
        for (s, span) in block.span_iter() {
            let e = self.statement(s, span, div, in_switch);
            // Some invocations left: the rest runs in divergent flow.
            div |= e.any();
            out = out.or(e);
        }
        out
    }

    fn statement(&mut self, s: &Statement, span: &naga::Span, div: bool, in_switch: bool) -> Exits {
        use Statement as S;
        let here = (*span != naga::Span::UNDEFINED).then_some(*span);
        match *s {
            S::Emit(_) => Exits::default(),
            S::Block(ref b) => self.block(b, div, in_switch),
            S::If {
                condition,
                ref accept,
                ref reject,
            } => {
                let d = div || !self.uniform(condition);
                let a = self.block(accept, d, in_switch);
                let r = self.block(reject, d, in_switch);
                a.or(r)
            }
            S::Switch {
                selector,
                ref cases,
            } => {
                let d = div || !self.uniform(selector);
                let mut out = Exits::default();
                for c in cases {
                    out = out.or(self.block(&c.body, d, true));
                }
                // Leaving a case is the switch's business; after it, flow is as before.
                Exits {
                    case_exit: false,
                    ..out
                }
            }
            S::Loop {
                ref body,
                ref continuing,
                break_if,
            } => {
                let mark = self.errors.len();
                let (mut b, mut c, cond) = self.loop_once(body, continuing, break_if, div);
                if !div && (b.any() || c.any() || !cond) {
                    // Some invocations may leave the loop (or return) before others: every iteration's flow
                    // is divergent.
                    self.errors.truncate(mark);
                    (b, c, _) = self.loop_once(body, continuing, break_if, true);
                }
                Exits {
                    fn_exit: b.fn_exit || c.fn_exit,
                    ..Exits::default()
                }
            }
            S::Break if in_switch => Exits {
                case_exit: div,
                ..Exits::default()
            },
            S::Break | S::Continue => Exits {
                loop_exit: div,
                ..Exits::default()
            },
            S::Return { value } => {
                if div || value.is_some_and(|v| !self.uniform(v)) {
                    self.nonuniform_return = true;
                }
                Exits {
                    fn_exit: div,
                    ..Exits::default()
                }
            }
            S::Kill => Exits {
                fn_exit: div,
                ..Exits::default()
            },
            S::ControlBarrier(_) => {
                if div {
                    self.errors.push(here);
                }
                Exits::default()
            }
            S::WorkGroupUniformLoad { result, .. } => {
                if div {
                    self.errors.push(here);
                }
                self.results.insert(result, true);
                Exits::default()
            }
            S::Store { pointer, value } => {
                if let Some(v) = self.local_root(pointer)
                    && (div || !self.uniform(value) || !self.uniform(pointer))
                {
                    self.locals.insert(v);
                }
                Exits::default()
            }
            S::Call {
                function,
                ref arguments,
                result,
            } => {
                let args: Vec<bool> = arguments.iter().map(|&a| self.uniform(a)).collect();
                let callee = &self.module.functions[function];
                if self.barriers.get(&function).copied().unwrap_or(false) && div {
                    self.errors.push(here);
                }
                // The callee's own flow (with these arguments' uniformity), and its result's.
                let mut inner = Analysis {
                    module: self.module,
                    f: callee,
                    args: &args,
                    struct_args: HashMap::new(),
                    barriers: self.barriers,
                    locals: HashSet::new(),
                    results: HashMap::new(),
                    memo: HashMap::new(),
                    errors: Vec::new(),
                    nonuniform_return: false,
                };
                if let Some(e) = inner.run() {
                    self.errors.push(e.or(here));
                }
                if let Some(r) = result {
                    self.results.insert(r, !div && !inner.nonuniform_return);
                }
                // A pointer into a local passed on may be stored through: the local is no longer known uniform.
                for &a in arguments {
                    if let Some(v) = self.local_root(a) {
                        self.locals.insert(v);
                    }
                }
                Exits::default()
            }
            S::Atomic { result, .. } => {
                if let Some(r) = result {
                    self.results.insert(r, false);
                }
                Exits::default()
            }
            // Subgroup operations, image stores, ray queries, memory barriers: no effect on the flow.
            _ => Exits::default(),
        }
    }

    /// One walk of a loop's body and continuing block; whether its `break if` is uniform.
    fn loop_once(
        &mut self,
        body: &Block,
        continuing: &Block,
        break_if: Option<Handle<Expression>>,
        div: bool,
    ) -> (Exits, Exits, bool) {
        let b = self.block(body, div, false);
        let c = self.block(continuing, div || b.loop_exit, false);
        let cond = break_if.is_none_or(|e| self.uniform(e));
        (b, c, cond)
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    /// The analysis of a kernel whose body is `body`, with a workgroup array `s`, a uniform `p`, read-only `x`,
    /// read-write `y` and the ids `w`, `l`, `g` at hand.
    fn verdict(body: &str) -> Result<(), String> {
        let src = format!(
            "
struct P {{ n: u32, k: u32 }}
var<workgroup> s: array<u32, 64>;
var<workgroup> flag: u32;
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
fn sync() {{ workgroupBarrier(); }}
fn first_of(w: vec3<u32>) -> u32 {{ return w.x * 64u + p.n; }}
fn clamped(v: u32) -> u32 {{ if v > 4u {{ return 4u; }} return v; }}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) l: u32,
        @builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {{
{body}
}}"
        );
        let m = naga::front::wgsl::parse_str(&src).map_err(|e| e.emit_to_string(&src))?;
        crate::rewrite::validate(&m, naga::valid::Capabilities::empty());
        check(&m, &src)
    }

    #[track_caller]
    fn fine(body: &str) {
        if let Err(e) = verdict(body) {
            panic!("refused: {e}\n{body}");
        }
    }

    #[track_caller]
    fn refused(body: &str) -> String {
        match verdict(body) {
            Ok(()) => panic!("passed:\n{body}"),
            Err(e) => {
                assert!(e.contains("`main`") && e.contains("barrier"), "{e}");
                e
            }
        }
    }

    #[test]
    fn barriers_in_workgroup_uniform_flow_pass_without_a_device() {
        // The dense GEMM's K loop: bounds from the workgroup id and a uniform, a local counter, a buffer index
        // flipped each tile, barriers inside; loops over the invocation's own elements beside them.
        fine(
            "
    let kbeg = w.z * p.k; let kend = min(p.n, kbeg + p.k);
    var buf = 0u;
    for (var e = l; e < 64u; e += 64u) { s[e] = x[e]; }
    workgroupBarrier();
    for (var k0 = kbeg; k0 < kend; k0 += 8u) {
        let more = k0 + 8u < kend;
        if more { for (var e = l; e < 64u; e += 64u) { s[e] = x[k0 + e]; } }
        workgroupBarrier();
        buf = 1u - buf;
    }
    y[g.x] = s[l] + buf;",
        );
        // Uniform and read-only values at uniform indices, arrayLength, a helper of uniform arguments, a uniform
        // switch, the number of workgroups, workgroupUniformLoad.
        fine(
            "
    let n = x[p.n] + arrayLength(&y) + first_of(w) + nw.y;
    if n > 3u { workgroupBarrier(); }
    switch clamped(p.k) { case 1u: { sync(); } default: { workgroupBarrier(); } }
    if l == 0u { flag = 1u; }
    if workgroupUniformLoad(&flag) == 1u { workgroupBarrier(); }",
        );
        // A loop that some invocations leave early, then a barrier after it: the flow has met again.
        fine(
            "
    for (var i = 0u; i < 8u; i++) { if x[l + i] == 0u { break; } y[l] += 1u; }
    workgroupBarrier();",
        );
    }

    #[test]
    fn barriers_in_divergent_flow_are_refused_with_their_line_without_a_device() {
        let e = refused("    if l < 32u {\n        workgroupBarrier();\n    }");
        assert!(e.contains("(line 15)"), "{e}");
        // After some invocations returned.
        refused("    if g.x >= p.n { return; }\n    workgroupBarrier();");
        // In a loop some invocations leave early, or whose bound is per invocation (a local stored from one).
        refused(
            "    for (var i = 0u; i < 8u; i++) { if x[l + i] == 0u { break; } workgroupBarrier(); }",
        );
        refused("    var n = l % 4u;\n    for (var i = 0u; i < n; i++) { workgroupBarrier(); }");
        refused(
            "    var n = 4u;\n    if l == 0u { n = 2u; }\n    for (var i = 0u; i < n; i++) { workgroupBarrier(); }",
        );
        // Workgroup memory and read-write storage hold per-invocation values; read-only storage at a
        // per-invocation index too.
        refused("    if flag == 1u { workgroupBarrier(); }");
        refused("    if y[0] == 1u { workgroupBarrier(); }");
        refused("    if x[l] == 1u { workgroupBarrier(); }");
        // A non-uniform switch, a helper holding a barrier, a helper's result from per-invocation input.
        refused("    switch l { case 0u: { workgroupBarrier(); } default: {} }");
        refused("    if g.x < 8u { sync(); }");
        refused("    if clamped(l) == 4u { workgroupBarrier(); }");
        refused("    if l > 3u { let v = workgroupUniformLoad(&flag); y[l] = v; }");
    }
}
