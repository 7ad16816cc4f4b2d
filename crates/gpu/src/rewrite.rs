//! What the pipeline layer's quirks share: a prologue of statements built over an entry point's validated naga
//! function and put before its own body (stale workgroup memory, reversed workgroups), and an expression's value
//! given instead by a call put in its place (fused multiply-adds, flushed subnormals), with the called functions
//! placed before every other function.

use std::collections::{HashMap, HashSet};

use naga::{
    Arena, Binding, Block, BuiltIn, Expression, Function, FunctionArgument, Handle, Literal,
    Module, Range, ScalarKind, Span, Statement, Type, TypeInner,
};

/// Statements to run before an entry point's body, and the expressions they need, appended to its function.
pub(crate) struct Prologue<'a> {
    pub f: &'a mut Function,
    pub types: &'a naga::UniqueArena<Type>,
    pub u32_ty: Handle<Type>,
    pub body: Block,
}

impl<'a> Prologue<'a> {
    pub fn new(
        f: &'a mut Function,
        types: &'a naga::UniqueArena<Type>,
        u32_ty: Handle<Type>,
    ) -> Self {
        Self {
            f,
            types,
            u32_ty,
            body: Block::new(),
        }
    }

    /// The entry point's built-in `builtin` (of type `ty`), as an argument or a struct member, added as an
    /// argument named `name` where the entry point has none.
    pub fn builtin(
        &mut self,
        builtin: BuiltIn,
        ty: Handle<Type>,
        name: &str,
    ) -> Handle<Expression> {
        let wanted = Binding::BuiltIn(builtin);
        for (i, arg) in self.f.arguments.iter().enumerate() {
            if arg.binding.as_ref() == Some(&wanted) {
                return self.pre(Expression::FunctionArgument(i as u32));
            }
            if let TypeInner::Struct { members, .. } = &self.types[arg.ty].inner
                && let Some(m) = members
                    .iter()
                    .position(|m| m.binding.as_ref() == Some(&wanted))
            {
                let a = self.pre(Expression::FunctionArgument(i as u32));
                return self.emit(Expression::AccessIndex {
                    base: a,
                    index: m as u32,
                });
            }
        }
        self.f.arguments.push(FunctionArgument {
            name: Some(name.into()),
            ty,
            binding: Some(wanted),
        });
        self.pre(Expression::FunctionArgument(
            self.f.arguments.len() as u32 - 1,
        ))
    }

    /// The entry point's `local_invocation_index`, added as an argument where it has none.
    pub fn local_invocation_index(&mut self) -> Handle<Expression> {
        self.builtin(BuiltIn::LocalInvocationIndex, self.u32_ty, "bespoke_lid")
    }

    /// An expression that needs no `Emit` (literals, arguments, variables).
    pub fn pre(&mut self, e: Expression) -> Handle<Expression> {
        self.f.expressions.append(e, Span::UNDEFINED)
    }

    /// Appends `e` with an `Emit` of it into the prologue.
    pub fn emit(&mut self, e: Expression) -> Handle<Expression> {
        let h = self.f.expressions.append(e, Span::UNDEFINED);
        self.body.push(
            Statement::Emit(Range::new_from_bounds(h, h)),
            Span::UNDEFINED,
        );
        h
    }

    pub fn u32(&mut self, v: u32) -> Handle<Expression> {
        self.pre(Expression::Literal(Literal::U32(v)))
    }

    /// Puts the prologue before the function's own body.
    pub fn prepend(self) {
        let mut body = self.body;
        body.append(&mut self.f.body);
        self.f.body = body;
    }
}

/// The compute entry points' arguments bound to one of `builtins` (each its built-in and its WGSL name): (entry
/// point, argument, index into `builtins`). One taken as a struct member is an error naming the entry point, so no
/// kernel escapes a quirk that rewrites its reads (the reversals').
pub(crate) fn builtin_arguments(
    module: &Module,
    builtins: &[(BuiltIn, &str)],
) -> Result<Vec<(usize, u32, usize)>, String> {
    let mut found = Vec::new();
    for (e, ep) in module.entry_points.iter().enumerate() {
        if ep.stage != naga::ShaderStage::Compute {
            continue;
        }
        for (i, arg) in ep.function.arguments.iter().enumerate() {
            for (r, &(builtin, wgsl)) in builtins.iter().enumerate() {
                let b = Some(Binding::BuiltIn(builtin));
                if arg.binding == b {
                    found.push((e, i as u32, r));
                } else if let TypeInner::Struct { members, .. } = &module.types[arg.ty].inner
                    && members.iter().any(|m| m.binding == b)
                {
                    return Err(format!(
                        "entry point `{}` takes {wgsl} as a member of its argument `{}`",
                        ep.name,
                        arg.name.as_deref().unwrap_or("?")
                    ));
                }
            }
        }
    }
    Ok(found)
}

/// The module's `u32` and `vec3<u32>` types, added where it lacks them.
pub(crate) fn u32_types(module: &mut Module) -> (Handle<Type>, Handle<Type>) {
    let mut ty = |inner| {
        module
            .types
            .insert(Type { name: None, inner }, Span::UNDEFINED)
    };
    (
        ty(TypeInner::Scalar(naga::Scalar::U32)),
        ty(TypeInner::Vector {
            size: naga::VectorSize::Tri,
            scalar: naga::Scalar::U32,
        }),
    )
}

/// Turns every expression of `f` that reads argument `arg` into the result of a call of `function`, and returns
/// them: the caller puts the calls (`Statement::Call` with each as its result) before the body. No expression
/// moves, so no handle is renumbered.
pub(crate) fn reads_as_call_results(
    f: &mut Function,
    arg: u32,
    function: Handle<Function>,
) -> Vec<Handle<Expression>> {
    let mut reads = Vec::new();
    for (h, x) in f.expressions.iter_mut() {
        if matches!(x, Expression::FunctionArgument(a) if *a == arg) {
            *x = Expression::CallResult(function);
            reads.push(h);
        }
    }
    reads
}

/// One component of an entry point's workgroup size: a number, or the override that sets it (`true` where the
/// override is a u32, else an i32).
#[derive(Clone, Copy)]
enum SizeDim {
    Fixed(u32),
    Override(Handle<naga::Override>, bool),
}

/// Entry point `e`'s workgroup size, each component a literal or an override; a size computed from overrides is
/// an error naming the entry point.
fn workgroup_size(module: &Module, e: usize) -> Result<[SizeDim; 3], String> {
    let ep = &module.entry_points[e];
    let mut dims = [SizeDim::Fixed(0); 3];
    for (d, dim) in dims.iter_mut().enumerate() {
        *dim = match ep.workgroup_size_overrides.and_then(|o| o[d]) {
            None => SizeDim::Fixed(ep.workgroup_size[d]),
            Some(h) => match module.global_expressions[h] {
                Expression::Literal(Literal::U32(v)) => SizeDim::Fixed(v),
                Expression::Literal(Literal::I32(v)) if v > 0 => SizeDim::Fixed(v as u32),
                Expression::Override(o) => SizeDim::Override(
                    o,
                    module.types[module.overrides[o].ty].inner.scalar_kind()
                        == Some(ScalarKind::Uint),
                ),
                _ => {
                    return Err(format!(
                        "entry point `{}` has a workgroup size computed from overrides",
                        ep.name
                    ));
                }
            },
        };
    }
    Ok(dims)
}

/// Turns every read of the entry-point arguments `readers` lists ((entry point, argument, which)) into the
/// result of a call, at the top of the entry point's body, of `functions[which]` with the raw argument, the
/// values `extra` asks for (from the prologue), and, where `with_size`, the workgroup size as a `vec3<u32>` (its
/// constant, or the override that sets it). No expression moves, so no handle is renumbered. The reversal
/// quirks' one mechanism.
pub(crate) fn reads_as_calls(
    module: &mut Module,
    readers: &[(usize, u32, usize)],
    functions: &[Handle<Function>],
    with_size: impl Fn(usize) -> bool,
    mut extra: impl FnMut(&mut Prologue<'_>, usize) -> Vec<Handle<Expression>>,
) -> Result<(), String> {
    let (u32_ty, vec3_ty) = u32_types(module);
    for e in 0..module.entry_points.len() {
        let mine: Vec<_> = readers.iter().filter(|r| r.0 == e).collect();
        if mine.is_empty() {
            continue;
        }
        let dims = if mine.iter().any(|r| with_size(r.2)) {
            Some(workgroup_size(module, e)?)
        } else {
            None
        };
        let f = &mut module.entry_points[e].function;
        let mut calls = Vec::new();
        for &&(_, arg, r) in &mine {
            for h in reads_as_call_results(f, arg, functions[r]) {
                calls.push((h, arg, r));
            }
        }
        let mut p = Prologue::new(f, &module.types, u32_ty);
        let size = dims.map(|dims| {
            let components = dims
                .iter()
                .map(|d| match *d {
                    SizeDim::Fixed(v) => p.u32(v),
                    SizeDim::Override(o, true) => p.pre(Expression::Override(o)),
                    SizeDim::Override(o, false) => {
                        let v = p.pre(Expression::Override(o));
                        p.emit(Expression::As {
                            expr: v,
                            kind: ScalarKind::Uint,
                            convert: Some(4),
                        })
                    }
                })
                .collect();
            p.emit(Expression::Compose {
                ty: vec3_ty,
                components,
            })
        });
        for (h, arg, r) in calls {
            let mut arguments = vec![p.pre(Expression::FunctionArgument(arg))];
            arguments.extend(extra(&mut p, r));
            if with_size(r) {
                arguments.extend(size);
            }
            p.body.push(
                Statement::Call {
                    function: functions[r],
                    arguments,
                    result: Some(h),
                },
                Span::UNDEFINED,
            );
        }
        p.prepend();
    }
    Ok(())
}

/// A function of one block, built expression by expression: `name(arguments) -> result`, each emitted
/// expression in an `Emit` of its own, then a `return` (the quirks' small helpers).
pub(crate) struct SmallFunction(Function);

impl SmallFunction {
    pub fn new(name: String, arguments: &[(&str, Handle<Type>)], result: Handle<Type>) -> Self {
        Self(Function {
            name: Some(name),
            arguments: arguments
                .iter()
                .map(|&(name, ty)| FunctionArgument {
                    name: Some(name.into()),
                    ty,
                    binding: None,
                })
                .collect(),
            result: Some(naga::FunctionResult {
                ty: result,
                binding: None,
            }),
            ..Default::default()
        })
    }

    /// The `i`th argument's value.
    pub fn arg(&mut self, i: u32) -> Handle<Expression> {
        self.pre(Expression::FunctionArgument(i))
    }

    /// An expression that needs no `Emit` (literals, arguments).
    pub fn pre(&mut self, e: Expression) -> Handle<Expression> {
        self.0.expressions.append(e, Span::UNDEFINED)
    }

    /// Appends `e` with an `Emit` of it.
    pub fn emit(&mut self, e: Expression) -> Handle<Expression> {
        let h = self.0.expressions.append(e, Span::UNDEFINED);
        self.0.body.push(
            Statement::Emit(Range::new_from_bounds(h, h)),
            Span::UNDEFINED,
        );
        h
    }

    /// The function, returning `value`.
    pub fn returning(mut self, value: Handle<Expression>) -> Function {
        self.0
            .body
            .push(Statement::Return { value: Some(value) }, Span::UNDEFINED);
        self.0
    }
}

/// Puts `functions` before every function of `module` (so a function that calls one calls a function before it,
/// as naga's arenas expect), and points every call at the moved functions' new handles. Returns their handles.
pub fn prepend_functions(module: &mut Module, functions: Vec<Function>) -> Vec<Handle<Function>> {
    if functions.is_empty() {
        return Vec::new();
    }
    let old: Vec<Handle<Function>> = module.functions.iter().map(|(h, _)| h).collect();
    let mut arena = Arena::new();
    let added = functions
        .into_iter()
        .map(|f| arena.append(f, Span::UNDEFINED))
        .collect();
    let mut moved = HashMap::new();
    for (f, h) in std::mem::take(&mut module.functions)
        .into_inner()
        .into_iter()
        .zip(old)
    {
        moved.insert(h, arena.append(f, Span::UNDEFINED));
    }
    module.functions = arena;
    let remap = |f: &mut Function| {
        for (_, e) in f.expressions.iter_mut() {
            if let Expression::CallResult(h) = e {
                *h = moved[h];
            }
        }
        each_block_mut(&mut f.body, &mut |b| {
            for s in b.iter_mut() {
                if let Statement::Call { function, .. } = s {
                    *function = moved[function];
                }
            }
        });
    };
    module.functions.iter_mut().for_each(|(_, f)| remap(f));
    module
        .entry_points
        .iter_mut()
        .for_each(|ep| remap(&mut ep.function));
    added
}

/// Calls `f` on `block` and on every block nested in it.
pub fn each_block(block: &Block, f: &mut impl FnMut(&Block)) {
    f(block);
    for s in block.iter() {
        match s {
            Statement::Block(b) => each_block(b, f),
            Statement::If { accept, reject, .. } => {
                each_block(accept, f);
                each_block(reject, f);
            }
            Statement::Loop {
                body, continuing, ..
            } => {
                each_block(body, f);
                each_block(continuing, f);
            }
            Statement::Switch { cases, .. } => cases.iter().for_each(|c| each_block(&c.body, f)),
            _ => {}
        }
    }
}

/// Calls `f` on `block` and on every block nested in it, mutably.
pub fn each_block_mut(block: &mut Block, f: &mut impl FnMut(&mut Block)) {
    f(block);
    for s in block.iter_mut() {
        match s {
            Statement::Block(b) => each_block_mut(b, f),
            Statement::If { accept, reject, .. } => {
                each_block_mut(accept, f);
                each_block_mut(reject, f);
            }
            Statement::Loop {
                body, continuing, ..
            } => {
                each_block_mut(body, f);
                each_block_mut(continuing, f);
            }
            Statement::Switch { cases, .. } => cases
                .iter_mut()
                .for_each(|c| each_block_mut(&mut c.body, f)),
            _ => {}
        }
    }
}

/// The call that gives an expression's value in its place: `emit_first` (an expression of its own, emitted just
/// before the call) and the function with its arguments.
pub struct CallAt {
    pub emit_first: Option<Handle<Expression>>,
    pub function: Handle<Function>,
    pub arguments: Vec<Handle<Expression>>,
}

/// Splits each `Emit` of `body` that covers an expression of `calls` around it, with the expression's call (and
/// what it emits first) in its place; the expression itself must already be the call's `CallResult`.
pub fn call_in_place(body: &mut Block, calls: &HashMap<Handle<Expression>, CallAt>) {
    let in_place = calls
        .iter()
        .map(|(&h, call)| {
            let mut s: Vec<Statement> = call
                .emit_first
                .map(|e| Statement::Emit(Range::new_from_bounds(e, e)))
                .into_iter()
                .collect();
            s.push(Statement::Call {
                function: call.function,
                arguments: call.arguments.clone(),
                result: Some(h),
            });
            (h, s)
        })
        .collect();
    statements_in_place(body, &in_place);
}

/// Splits each `Emit` of `body` that covers an expression of `in_place` around it, with the expression's
/// statements in its place (which must define the expression, as a call's result does).
pub fn statements_in_place(
    body: &mut Block,
    in_place: &HashMap<Handle<Expression>, Vec<Statement>>,
) {
    each_block_mut(body, &mut |b| {
        if !b.iter().any(
            |s| matches!(s, Statement::Emit(r) if r.clone().any(|h| in_place.contains_key(&h))),
        ) {
            return;
        }
        let mut out = Block::with_capacity(b.len());
        for (s, span) in std::mem::take(b).span_into_iter() {
            let Statement::Emit(r) = &s else {
                out.push(s, span);
                continue;
            };
            let mut run: Option<(Handle<Expression>, Handle<Expression>)> = None;
            for h in r.clone() {
                let Some(statements) = in_place.get(&h) else {
                    run = Some((run.map_or(h, |(first, _)| first), h));
                    continue;
                };
                if let Some((first, last)) = run.take() {
                    out.push(Statement::Emit(Range::new_from_bounds(first, last)), span);
                }
                for st in statements {
                    out.push(st.clone(), span);
                }
            }
            if let Some((first, last)) = run {
                out.push(Statement::Emit(Range::new_from_bounds(first, last)), span);
            }
        }
        *b = out;
    });
}

/// `per` of each function of `module`, then of each entry point's, with its validation.
pub fn per_function<T>(
    module: &Module,
    info: &naga::valid::ModuleInfo,
    mut per: impl FnMut(&Function, &naga::valid::FunctionInfo) -> T,
) -> Vec<T> {
    let mut all: Vec<T> = module
        .functions
        .iter()
        .map(|(h, f)| per(f, &info[h]))
        .collect();
    all.extend(
        module
            .entry_points
            .iter()
            .enumerate()
            .map(|(i, ep)| per(&ep.function, info.get_entry_point(i))),
    );
    all
}

/// One function per key (a type, or a type and what to compute with it), made by `make` and put before every
/// other function (`prepend_functions`); then every function that was there before them, and each entry point's,
/// mutably, in the order of [`per_function`].
pub fn add_per_key<'m, K: Clone + Eq + std::hash::Hash>(
    module: &'m mut Module,
    keys: &[K],
    mut make: impl FnMut(&mut naga::UniqueArena<Type>, &K) -> Function,
) -> (HashMap<K, Handle<Function>>, Vec<&'m mut Function>) {
    let made: Vec<Function> = keys.iter().map(|k| make(&mut module.types, k)).collect();
    let by_key = keys
        .iter()
        .cloned()
        .zip(prepend_functions(module, made))
        .collect();
    let functions = module
        .functions
        .iter_mut()
        .skip(keys.len())
        .map(|(_, f)| f)
        .chain(module.entry_points.iter_mut().map(|ep| &mut ep.function))
        .collect();
    (by_key, functions)
}

/// The expressions `f` emits (a constant one, folded already, is not).
pub fn emitted(f: &Function) -> HashSet<Handle<Expression>> {
    let mut emitted = HashSet::new();
    each_block(&f.body, &mut |b: &Block| {
        for s in b.iter() {
            if let Statement::Emit(r) = s {
                emitted.extend(r.clone());
            }
        }
    });
    emitted
}

/// The scalar of a float scalar or vector type (what [`float_type`] returns).
pub fn float_scalar(ty: &TypeInner) -> naga::Scalar {
    match *ty {
        TypeInner::Scalar(s) | TypeInner::Vector { scalar: s, .. } => s,
        _ => unreachable!("only float scalars and vectors are rewritten"),
    }
}

/// `h`'s type where it is a float scalar or vector.
pub fn float_type(
    info: &naga::valid::FunctionInfo,
    types: &naga::UniqueArena<Type>,
    h: Handle<Expression>,
) -> Option<TypeInner> {
    match info[h].ty.inner_with(types) {
        t @ (TypeInner::Scalar(s) | TypeInner::Vector { scalar: s, .. })
            if s.kind == ScalarKind::Float =>
        {
            Some(t.clone())
        }
        _ => None,
    }
}

/// `m` validated with every check and `caps` (the quirks' tests), or a panic saying why not.
#[cfg(test)]
pub(crate) fn validate(m: &Module, caps: naga::valid::Capabilities) -> naga::valid::ModuleInfo {
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(m)
        .unwrap_or_else(|e| panic!("{e:?}"))
}
