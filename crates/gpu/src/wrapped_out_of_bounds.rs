//! The wrapped-out-of-bounds quirk ([`Quirks::wraps_out_of_bounds`](crate::Quirks)): an array index past its
//! array's end reads and writes another element of the array, not a zero and nowhere.
//!
//! WGSL lets an out-of-bounds access load any value of the buffer or a zero and store anywhere in the buffer or
//! nowhere; Vulkan's `robustBufferAccess` allows the same, and nothing at all guards workgroup memory in a module
//! without bounds checks (`Kernel::without_bounds_checks`, whose kernels run unchecked on every backend, Metal's
//! too, which has no robust buffer access). lavapipe reads zeros past a buffer's end and drops the writes, so a
//! kernel that reads one element too far often passes its test there, the zero standing in for a value the
//! reference never needed. Under the quirk every such access lands on element `index mod length` (an i32 index
//! below zero on the last element), so it fails on any adapter.
//!
//! How: for each load, and each store or atomic, whose pointer is reached through an array element (`a[i]`,
//! `s.rows[i].x`, `wg[i][j]`), the chain of accesses from the variable to the element is made again with every
//! array index given by a call of `bespoke_wrap(index, length)` (the length a constant, or `arrayLength` of a
//! runtime-sized array); a store or atomic then goes through the new pointer, and a load's old handle becomes the
//! result of an identity call on the new load, in its place, so nothing is renumbered (naga's handles must only
//! point back). The old chains stay, no longer dereferenced.

use std::collections::HashMap;

use naga::{
    ArraySize, BinaryOperator, Block, Expression, Function, Handle, Literal, MathFunction, Module,
    Range, ScalarKind, Span, Statement, Type, TypeInner,
};

use crate::rewrite::{
    SmallFunction, add_per_key, each_block_mut, emitted, per_function, statements_in_place,
};

/// What the quirk adds to a module: wrapping functions by index type, identity functions by loaded type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Helper {
    /// `bespoke_wrap_u32` / `bespoke_wrap_i32`.
    Wrap(ScalarKind),
    /// `bespoke_loaded(v: T) -> T`.
    Identity(Handle<Type>),
}

/// One link of a pointer's chain from its variable: the expression and, where it takes an element of an array,
/// the array's length (`None`: runtime-sized) and the index's kind.
#[derive(Clone, Debug)]
struct Link {
    expr: Handle<Expression>,
    array: Option<(Option<u32>, ScalarKind)>,
}

/// What one function's rewrite needs: its loads through array elements (with their chains and value types) and
/// the pointers its stores and atomics go through.
struct Found {
    loads: Vec<(Handle<Expression>, Vec<Link>, naga::proc::TypeResolution)>,
    pointers: HashMap<Handle<Expression>, Vec<Link>>,
}

/// Wraps every array index of `module`'s loads, stores and atomics. `info` is the module's validation (the
/// expressions' types; types the loads need are added to the module). Returns how many loads it wraps plus how
/// many pointers its stores and atomics go through (a pointer two stores share counts once).
pub(crate) fn wrap_out_of_bounds(module: &mut Module, info: &naga::valid::ModuleInfo) -> usize {
    let found: Vec<Found> = {
        let types = &module.types;
        per_function(module, info, |f, i| find(f, i, types))
    };
    let total: usize = found.iter().map(|f| f.loads.len() + f.pointers.len()).sum();
    if total == 0 {
        return 0;
    }
    // The loaded types as handles (inserting into the type arena renumbers nothing).
    let found: Vec<(Loads, _)> = found
        .into_iter()
        .map(|fd| {
            let loads = fd
                .loads
                .into_iter()
                .map(|(h, links, ty)| {
                    let ty = match ty {
                        naga::proc::TypeResolution::Handle(t) => t,
                        naga::proc::TypeResolution::Value(inner) => module
                            .types
                            .insert(Type { name: None, inner }, Span::UNDEFINED),
                    };
                    (h, links, ty)
                })
                .collect();
            (loads, fd.pointers)
        })
        .collect();
    let mut keys = vec![
        Helper::Wrap(ScalarKind::Uint),
        Helper::Wrap(ScalarKind::Sint),
    ];
    for (loads, _) in &found {
        for (_, _, ty) in loads {
            if !keys.contains(&Helper::Identity(*ty)) {
                keys.push(Helper::Identity(*ty));
            }
        }
    }
    let (helpers, functions) = add_per_key(module, &keys, helper);
    for (f, (loads, pointers)) in functions.into_iter().zip(found) {
        rewrite(f, loads, &pointers, &helpers);
    }
    total
}

/// The pointer chain of `p` back to its variable, each link with its array (if any); None where the chain holds
/// no array element, or passes through something the quirk does not follow.
fn chain(
    f: &Function,
    info: &naga::valid::FunctionInfo,
    types: &naga::UniqueArena<Type>,
    p: Handle<Expression>,
) -> Option<Vec<Link>> {
    let mut links = Vec::new();
    let mut at = p;
    loop {
        let (base, index) = match f.expressions[at] {
            Expression::GlobalVariable(_)
            | Expression::LocalVariable(_)
            | Expression::FunctionArgument(_) => break,
            Expression::Access { base, index } => (base, Some(index)),
            Expression::AccessIndex { base, .. } => (base, None),
            _ => return None,
        };
        let array = match info[base].ty.inner_with(types) {
            TypeInner::Pointer { base: pointee, .. } => match types[*pointee].inner {
                TypeInner::Array { size, .. } => {
                    let length = match size {
                        ArraySize::Constant(n) => Some(n.get()),
                        ArraySize::Dynamic => None,
                        ArraySize::Pending(_) => return None,
                    };
                    match index {
                        Some(i) => Some((length, info[i].ty.inner_with(types).scalar_kind()?)),
                        // A constant index into a fixed-size array was checked by the validator.
                        None => length.is_none().then_some((None, ScalarKind::Uint)),
                    }
                }
                _ => None,
            },
            _ => None,
        };
        links.push(Link { expr: at, array });
        at = base;
    }
    links.reverse();
    links.iter().any(|l| l.array.is_some()).then_some(links)
}

fn find(f: &Function, info: &naga::valid::FunctionInfo, types: &naga::UniqueArena<Type>) -> Found {
    let emitted = emitted(f);
    let mut loads = Vec::new();
    for (h, e) in f.expressions.iter() {
        if let Expression::Load { pointer } = *e
            && emitted.contains(&h)
            && let Some(links) = chain(f, info, types, pointer)
        {
            loads.push((h, links, info[h].ty.clone()));
        }
    }
    let mut pointers = HashMap::new();
    crate::rewrite::each_block(&f.body, &mut |b: &Block| {
        for s in b.iter() {
            if let Statement::Store { pointer, .. } | Statement::Atomic { pointer, .. } = *s
                && let Some(links) = chain(f, info, types, pointer)
            {
                pointers.insert(pointer, links);
            }
        }
    });
    Found { loads, pointers }
}

/// The helper function `key` stands for.
fn helper(types: &mut naga::UniqueArena<Type>, key: &Helper) -> Function {
    match *key {
        Helper::Identity(ty) => {
            let mut f = SmallFunction::new("bespoke_loaded".into(), &[("v", ty)], ty);
            let v = f.arg(0);
            f.returning(v)
        }
        Helper::Wrap(kind) => wrapper(types, kind),
    }
}

/// `fn bespoke_wrap_u32(i: u32, n: u32) -> u32 { return select(i % max(n, 1), i, i < n); }`, and for i32
/// `select(i32(max(n, 1) - 1), i, i >= 0 && u32(i) < n)`.
fn wrapper(types: &mut naga::UniqueArena<Type>, kind: ScalarKind) -> Function {
    let scalar = |kind| naga::Scalar { kind, width: 4 };
    let ty = |types: &mut naga::UniqueArena<Type>, kind| {
        types.insert(
            Type {
                name: None,
                inner: TypeInner::Scalar(scalar(kind)),
            },
            Span::UNDEFINED,
        )
    };
    let u = ty(types, ScalarKind::Uint);
    let t = ty(types, kind);
    let name = match kind {
        ScalarKind::Uint => "bespoke_wrap_u32",
        _ => "bespoke_wrap_i32",
    };
    let mut f = SmallFunction::new(name.into(), &[("i", t), ("n", u)], t);
    let i = f.arg(0);
    let n = f.arg(1);
    let bin = |op, left, right| Expression::Binary { op, left, right };
    let one = f.pre(Expression::Literal(Literal::U32(1)));
    let n1 = f.emit(Expression::Math {
        fun: MathFunction::Max,
        arg: n,
        arg1: Some(one),
        arg2: None,
        arg3: None,
    });
    let (inside, elsewhere) = if kind == ScalarKind::Uint {
        let inside = f.emit(bin(BinaryOperator::Less, i, n));
        (inside, f.emit(bin(BinaryOperator::Modulo, i, n1)))
    } else {
        let zero = f.pre(Expression::Literal(Literal::I32(0)));
        let non_negative = f.emit(bin(BinaryOperator::GreaterEqual, i, zero));
        let iu = f.emit(Expression::As {
            expr: i,
            kind: ScalarKind::Uint,
            convert: Some(4),
        });
        let below = f.emit(bin(BinaryOperator::Less, iu, n));
        let inside = f.emit(bin(BinaryOperator::LogicalAnd, non_negative, below));
        let last = f.emit(bin(BinaryOperator::Subtract, n1, one));
        let last = f.emit(Expression::As {
            expr: last,
            kind: ScalarKind::Sint,
            convert: Some(4),
        });
        (inside, last)
    };
    let v = f.emit(Expression::Select {
        condition: inside,
        accept: i,
        reject: elsewhere,
    });
    f.returning(v)
}

/// Makes `links` again after `prelude`'s statements, each array index wrapped; returns the new pointer.
fn wrapped_chain(
    exprs: &mut naga::Arena<Expression>,
    links: &[Link],
    helpers: &HashMap<Helper, Handle<Function>>,
    prelude: &mut Vec<Statement>,
) -> Handle<Expression> {
    let emit = |exprs: &mut naga::Arena<Expression>, prelude: &mut Vec<Statement>, e| {
        let h = exprs.append(e, Span::UNDEFINED);
        prelude.push(Statement::Emit(Range::new_from_bounds(h, h)));
        h
    };
    let mut base = match exprs[links[0].expr] {
        Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => base,
        _ => unreachable!("a chain's links are accesses"),
    };
    for link in links {
        let e = exprs[link.expr].clone();
        base = match (link.array, e) {
            (Some((length, kind)), e) => {
                let index = match e {
                    Expression::Access { index, .. } => index,
                    Expression::AccessIndex { index, .. } => {
                        exprs.append(Expression::Literal(Literal::U32(index)), Span::UNDEFINED)
                    }
                    _ => unreachable!("a chain's links are accesses"),
                };
                let n = match length {
                    Some(n) => exprs.append(Expression::Literal(Literal::U32(n)), Span::UNDEFINED),
                    None => emit(exprs, prelude, Expression::ArrayLength(base)),
                };
                let function = helpers[&Helper::Wrap(kind)];
                let wrapped = exprs.append(Expression::CallResult(function), Span::UNDEFINED);
                prelude.push(Statement::Call {
                    function,
                    arguments: vec![index, n],
                    result: Some(wrapped),
                });
                emit(
                    exprs,
                    prelude,
                    Expression::Access {
                        base,
                        index: wrapped,
                    },
                )
            }
            (None, Expression::Access { index, .. }) => {
                emit(exprs, prelude, Expression::Access { base, index })
            }
            (None, Expression::AccessIndex { index, .. }) => {
                emit(exprs, prelude, Expression::AccessIndex { base, index })
            }
            _ => unreachable!("a chain's links are accesses"),
        };
    }
    base
}

/// A function's loads through array elements (each with its chain and loaded type).
type Loads = Vec<(Handle<Expression>, Vec<Link>, Handle<Type>)>;

fn rewrite(
    f: &mut Function,
    loads: Loads,
    pointers: &HashMap<Handle<Expression>, Vec<Link>>,
    helpers: &HashMap<Helper, Handle<Function>>,
) {
    let Function {
        expressions, body, ..
    } = f;
    // Each load's new statements, put in its place; its handle becomes the identity's result.
    let mut at_load: HashMap<Handle<Expression>, Vec<Statement>> = HashMap::new();
    for (h, links, ty) in loads {
        let mut prelude = Vec::new();
        let pointer = wrapped_chain(expressions, &links, helpers, &mut prelude);
        let load = expressions.append(Expression::Load { pointer }, Span::UNDEFINED);
        prelude.push(Statement::Emit(Range::new_from_bounds(load, load)));
        let function = helpers[&Helper::Identity(ty)];
        expressions[h] = Expression::CallResult(function);
        prelude.push(Statement::Call {
            function,
            arguments: vec![load],
            result: Some(h),
        });
        at_load.insert(h, prelude);
    }
    statements_in_place(body, &at_load);
    // Stores and atomics go through a wrapped chain made just before them.
    each_block_mut(body, &mut |b| {
        if !b.iter().any(|s| {
            matches!(s, Statement::Store { pointer, .. } | Statement::Atomic { pointer, .. }
                if pointers.contains_key(pointer))
        }) {
            return;
        }
        let mut out = Block::with_capacity(b.len());
        for (s, span) in std::mem::take(b).span_into_iter() {
            match s {
                Statement::Store { pointer, value } if pointers.contains_key(&pointer) => {
                    let mut prelude = Vec::new();
                    let pointer =
                        wrapped_chain(expressions, &pointers[&pointer], helpers, &mut prelude);
                    prelude.into_iter().for_each(|p| out.push(p, span));
                    out.push(Statement::Store { pointer, value }, span);
                }
                Statement::Atomic {
                    pointer,
                    fun,
                    value,
                    result,
                } if pointers.contains_key(&pointer) => {
                    let mut prelude = Vec::new();
                    let pointer =
                        wrapped_chain(expressions, &pointers[&pointer], helpers, &mut prelude);
                    prelude.into_iter().for_each(|p| out.push(p, span));
                    out.push(
                        Statement::Atomic {
                            pointer,
                            fun,
                            value,
                            result,
                        },
                        span,
                    );
                }
                s => out.push(s, span),
            }
        }
        *b = out;
    });
}

#[cfg(test)]
mod tests {
    use super::wrap_out_of_bounds;
    use crate::rewrite::validate;
    use naga::valid::Capabilities;

    #[test]
    fn every_access_through_an_array_element_is_wrapped_and_validates_without_a_device() {
        let src = "
struct Rows { n: u32, rows: array<vec4<f32>> }
struct P { k: u32, table: array<vec4<u32>, 4> }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> r: Rows;
@group(0) @binding(3) var<storage, read_write> hits: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> p: P;
var<workgroup> tile: array<array<f32, 8>, 8>;
fn helper(i: i32) -> f32 { return x[i] + x[i - 1]; }
@compute @workgroup_size(8, 8)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(global_invocation_id) g: vec3<u32>) {
    tile[l.y][l.x] = x[g.x + 1u];
    workgroupBarrier();
    let k = g.x;
    y[k] = tile[l.x][l.y] + helper(i32(k)) + r.rows[k].y + f32(p.table[k % 5u].x);
    r.rows[k + 1u].z = y[k];
    r.rows[k] += vec4<f32>(1.0);
    atomicAdd(&hits[k * 2u], 1u);
    let c = x[3];
    var local: array<f32, 4>;
    local[k] = c;
    y[k + 2u] = local[k + 1u];
}";
        let mut m = naga::front::wgsl::parse_str(src).unwrap();
        let before = m.functions.len();
        let info = validate(&m, Capabilities::empty());
        let n = wrap_out_of_bounds(&mut m, &info);
        validate(&m, Capabilities::empty());
        // Loads: x ×4 (one in main, two in the helper, x[3] a constant index into a runtime-sized array), tile,
        // r.rows[k].y, p.table, r.rows[k] (its +=), local; stores: tile, y ×2, r.rows ×2, local; one atomic.
        assert!(n >= 16, "{n} accesses wrapped");
        // The u32 and i32 wrappers and an identity for each loaded type (f32, vec4<f32>, vec4<u32>) come first.
        assert_eq!(m.functions.len(), before + 5);
        assert_eq!(
            m.functions.iter().last().unwrap().1.name.as_deref(),
            Some("helper")
        );
    }

    #[test]
    fn a_kernel_without_array_elements_is_left_as_it_was_without_a_device() {
        let src = "
struct S { a: u32, b: vec4<f32> }
@group(0) @binding(0) var<storage, read_write> s: S;
@compute @workgroup_size(1)
fn main() { s.a = s.a + 1u; s.b.y = s.b.x; }";
        let mut m = naga::front::wgsl::parse_str(src).unwrap();
        let info = validate(&m, Capabilities::empty());
        let untouched = format!("{m:?}");
        assert_eq!(wrap_out_of_bounds(&mut m, &info), 0);
        assert_eq!(format!("{m:?}"), untouched);
    }
}
