//! The fused-multiply-add quirk ([`Quirks::fuses_multiply_add`](crate::Quirks)): every float `a * b + c` (and
//! `c + a * b`) of a kernel is computed as `fma(a, b, c)`, rounded once instead of twice.
//!
//! naga emits a multiply and an add without SPIR-V's `NoContraction`, so a driver may contract the pair into one
//! fused instruction, and GPU compilers do (NVIDIA's among them); lavapipe does not (measured: of 188 random f32
//! triples whose fused and unfused results differ, it gave the unfused one 188 times). A test that compares a
//! kernel with a plain-Rust reference bit for bit, or two kernels that a compiler may contract differently, then
//! passes on lavapipe and fails on a card. Under the quirk every such pair is fused, on any adapter: between the
//! plain adapter (none fused) and the quirk (all fused) lie the drivers that fuse some.
//!
//! How: the add's expression becomes, in place, the result of a call that computes the pair rounded once (so
//! nothing is renumbered): its `Emit` is split around it and the call put there. The called function (one a type,
//! put before every other function) computes in the type twice as wide, f32 in f64 and f16 in f32, where the
//! product is exact, and rounds the sum, then narrows it: that second rounding differs from a fused one only where
//! the wide sum falls exactly on a tie of the narrow type. naga's own `fma` cannot serve here: Vulkan lets a driver
//! compute it as a multiply and an add, and lavapipe does. f64 pairs, and every pair on a device without f64,
//! become naga's `fma` (fused where the driver fuses it). The multiply stays, unused where the add was its only
//! reader. Only pairs whose three operands have one float type are fused (a vector times a scalar is not), and a
//! subtraction is left alone: `a * b − c` would need a negation placed before it.

use std::collections::HashMap;

use naga::{
    BinaryOperator, Expression, Function, FunctionArgument, FunctionResult, Handle, MathFunction,
    Module, Range, Scalar, ScalarKind, Span, Statement, Type, TypeInner,
};

use crate::rewrite::{CallAt, add_per_type, call_in_place, emitted, float_type, per_function};

/// A float multiply-add found in a function: the add, the factors and the addend, and their type.
struct Pair {
    add: Handle<Expression>,
    a: Handle<Expression>,
    b: Handle<Expression>,
    c: Handle<Expression>,
    ty: TypeInner,
}

/// Fuses every float multiply-add of `module`'s functions and entry points. `info` is the module's validation
/// (the operands' types). `wide`: the device has f64, so f32 and f16 pairs are computed in the wider type and
/// rounded once (exact products, one rounding of the sum, then the narrowing: a second rounding that differs from
/// a fused one only where the wide sum falls on a tie of the narrow type); without it, and for f64, each pair
/// becomes naga's `fma`, which a driver may itself compute as a multiply and an add (lavapipe does). Returns how
/// many pairs it fused.
pub(crate) fn fuse_multiply_adds(
    module: &mut Module,
    info: &naga::valid::ModuleInfo,
    wide: bool,
) -> usize {
    let found = per_function(module, info, |f, i| pairs(f, i, &module.types));
    let total = found.iter().map(Vec::len).sum();
    if total == 0 {
        return 0;
    }
    // The types computed wider, each with its function: placed before every other function, so a helper that
    // calls one calls a function before it, as naga's arenas expect.
    let mut emulated: Vec<TypeInner> = Vec::new();
    if wide {
        for p in found.iter().flatten() {
            if scalar(&p.ty).width < 8 && !emulated.contains(&p.ty) {
                emulated.push(p.ty.clone());
            }
        }
    }
    let (emulators, functions) = add_per_type(module, &emulated, emulator);
    for (f, pairs) in functions.into_iter().zip(found) {
        let mut calls = HashMap::new();
        for p in pairs {
            match emulators.get(&format!("{:?}", p.ty)) {
                Some(&e) => {
                    f.expressions[p.add] = Expression::CallResult(e);
                    calls.insert(
                        p.add,
                        CallAt {
                            emit_first: None,
                            function: e,
                            arguments: vec![p.a, p.b, p.c],
                        },
                    );
                }
                None => {
                    f.expressions[p.add] = Expression::Math {
                        fun: MathFunction::Fma,
                        arg: p.a,
                        arg1: Some(p.b),
                        arg2: Some(p.c),
                        arg3: None,
                    }
                }
            }
        }
        if !calls.is_empty() {
            call_in_place(&mut f.body, &calls);
        }
    }
    total
}

fn scalar(ty: &TypeInner) -> Scalar {
    match *ty {
        TypeInner::Scalar(s) | TypeInner::Vector { scalar: s, .. } => s,
        _ => unreachable!("only float scalars and vectors are paired"),
    }
}

/// The float multiply-adds of `f` that it emits (a constant one, folded already, is not paired).
fn pairs(
    f: &Function,
    info: &naga::valid::FunctionInfo,
    types: &naga::UniqueArena<Type>,
) -> Vec<Pair> {
    let float = |h| float_type(info, types, h);
    let emitted = emitted(f);
    let mut found = Vec::new();
    for (add, e) in f.expressions.iter() {
        let Expression::Binary {
            op: BinaryOperator::Add,
            left,
            right,
        } = *e
        else {
            continue;
        };
        if !emitted.contains(&add) {
            continue;
        }
        // The multiply on the left first, as a compiler reading left to right would take it.
        let product = [(left, right), (right, left)]
            .into_iter()
            .find_map(|(p, c)| match f.expressions[p] {
                Expression::Binary {
                    op: BinaryOperator::Multiply,
                    left: a,
                    right: b,
                } => Some((a, b, c)),
                _ => None,
            });
        let Some((a, b, c)) = product else { continue };
        let Some(ty) = float(c) else { continue };
        if float(a).as_ref() == Some(&ty) && float(b).as_ref() == Some(&ty) {
            found.push(Pair { add, a, b, c, ty });
        }
    }
    found
}

/// `fn bespoke_fma(a: T, b: T, c: T) -> T { return T(W(a) * W(b) + W(c)); }`, W twice T's width.
fn emulator(types: &mut naga::UniqueArena<Type>, ty: &TypeInner) -> Function {
    let mut ty_of = |inner: TypeInner| types.insert(Type { name: None, inner }, Span::UNDEFINED);
    let narrow = ty_of(ty.clone());
    let width = scalar(ty).width;
    let arg = |name: &str| FunctionArgument {
        name: Some(name.into()),
        ty: narrow,
        binding: None,
    };
    let mut f = Function {
        name: Some(format!("bespoke_fma_{}", width * 8)),
        arguments: vec![arg("a"), arg("b"), arg("c")],
        result: Some(FunctionResult {
            ty: narrow,
            binding: None,
        }),
        ..Default::default()
    };
    let x = &mut f.expressions;
    let mut add = |e: Expression| x.append(e, Span::UNDEFINED);
    let args = [0, 1, 2].map(|i| add(Expression::FunctionArgument(i)));
    let [a, b, c] = args.map(|h| {
        add(Expression::As {
            expr: h,
            kind: ScalarKind::Float,
            convert: Some(width * 2),
        })
    });
    let first = a;
    let product = add(Expression::Binary {
        op: BinaryOperator::Multiply,
        left: a,
        right: b,
    });
    let sum = add(Expression::Binary {
        op: BinaryOperator::Add,
        left: product,
        right: c,
    });
    let back = add(Expression::As {
        expr: sum,
        kind: ScalarKind::Float,
        convert: Some(width),
    });
    f.body.push(
        Statement::Emit(Range::new_from_bounds(first, back)),
        Span::UNDEFINED,
    );
    f.body
        .push(Statement::Return { value: Some(back) }, Span::UNDEFINED);
    f
}

#[cfg(test)]
mod tests {
    use super::fuse_multiply_adds;
    use naga::valid::{Capabilities, ValidationFlags, Validator};

    fn validate(m: &naga::Module, caps: Capabilities) -> naga::valid::ModuleInfo {
        Validator::new(ValidationFlags::all(), caps)
            .validate(m)
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    /// Parses `src`, fuses it and validates the result; the module after, and how many pairs were fused.
    fn fused(src: &str, caps: Capabilities, wide: bool) -> (naga::Module, usize) {
        let mut m = naga::front::wgsl::parse_str(src)
            .unwrap_or_else(|e| panic!("{}", e.emit_to_string(src)));
        let info = validate(&m, caps);
        let n = fuse_multiply_adds(&mut m, &info, wide);
        validate(&m, caps);
        (m, n)
    }

    fn fmas(m: &naga::Module) -> usize {
        let count = |f: &naga::Function| {
            f.expressions
                .iter()
                .filter(|(_, e)| {
                    matches!(
                        e,
                        naga::Expression::Math {
                            fun: naga::MathFunction::Fma,
                            ..
                        }
                    )
                })
                .count()
        };
        m.functions.iter().map(|(_, f)| count(f)).sum::<usize>()
            + m.entry_points
                .iter()
                .map(|e| count(&e.function))
                .sum::<usize>()
    }

    fn calls(m: &naga::Module) -> usize {
        fn count(b: &naga::Block) -> usize {
            b.iter()
                .map(|s| match s {
                    naga::Statement::Call { .. } => 1,
                    naga::Statement::Loop { body, .. } | naga::Statement::Block(body) => {
                        count(body)
                    }
                    naga::Statement::If { accept, reject, .. } => count(accept) + count(reject),
                    _ => 0,
                })
                .sum()
        }
        m.functions
            .iter()
            .map(|(_, f)| count(&f.body))
            .sum::<usize>()
            + m.entry_points
                .iter()
                .map(|e| count(&e.function.body))
                .sum::<usize>()
    }

    const PAIRS: &str = "
enable f16;
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> v: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> i: array<u32>;
@group(0) @binding(3) var<storage, read_write> d: array<f64>;
@group(0) @binding(4) var<storage, read_write> h: array<f16>;
fn helper(a: f32, b: f32, c: f32) -> f32 { return c + a * b; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let k = g.x;
    x[k] = x[k] * x[k + 1u] + x[k + 2u];            // fused
    x[k + 3u] = helper(x[k], x[k + 1u], 2.0);         // fused, in the helper
    v[k] = v[k] * v[k + 1u] + v[k + 2u];            // fused: vectors alike
    v[k + 3u] = v[k] * x[k] + v[k + 2u];            // left: a vector times a scalar
    x[k + 4u] = x[k] * x[k + 1u] - x[k + 2u];       // left: a subtraction
    i[k] = i[k] * i[k + 1u] + i[k + 2u];            // left: integers
    d[k] = d[k] * d[k + 1u] + d[k + 2u];            // fused: f64
    h[k] = h[k] * h[k + 1u] + h[k + 2u];            // fused: f16
    var s = x[k];
    for (var j = 0u; j < k; j++) {
        if j % 2u == 0u { s = s * x[j] + 1.0; }      // fused, in nested blocks
    }
    x[k + 5u] = s;
}";

    #[test]
    fn float_multiply_adds_are_fused_and_the_rest_left_without_a_device() {
        let caps = Capabilities::FLOAT64 | Capabilities::SHADER_FLOAT16;
        // Without f64: naga's fma in place of each add.
        let (m, n) = fused(PAIRS, caps, false);
        assert_eq!(
            (n, fmas(&m), calls(&m)),
            (6, 6, 1),
            "the helper's call is the one call"
        );
        // With it: f32 and f16 through a function each type that computes them wider; f64 as naga's fma.
        let before = naga::front::wgsl::parse_str(PAIRS).unwrap();
        let (m, n) = fused(PAIRS, caps, true);
        assert_eq!((n, fmas(&m), calls(&m)), (6, 1, 6));
        // f32, vec4<f32> and f16 (the added functions come first, then the helper that calls one).
        assert_eq!(m.functions.len(), before.functions.len() + 3);
        assert_eq!(
            m.functions.iter().last().unwrap().1.name.as_deref(),
            Some("helper")
        );
    }

    #[test]
    fn a_kernel_without_a_float_multiply_add_is_left_as_it_was_without_a_device() {
        let src = "
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { x[g.x] = x[g.x] * 2.0 - 1.0 + f32(g.x * 3u + 1u); }";
        let before = naga::front::wgsl::parse_str(src).unwrap();
        let (after, n) = fused(src, Capabilities::empty(), true);
        assert_eq!(n, 0);
        assert_eq!(format!("{before:?}"), format!("{after:?}"));
    }
}
