//! The inexact-division quirk ([`Quirks::divides_inexactly`](crate::Quirks)): every f32 and f16 quotient `a / b`
//! of a kernel is computed as `a * (1 / b)` and every square root `sqrt(x)` as `1 / inverseSqrt(x)`, each rounded
//! more than once, instead of correctly rounded.
//!
//! Vulkan does not ask a driver for a correctly rounded quotient or square root: its precision table allows
//! 2.5 ULP for `x / y` (|y| in [2⁻¹²⁶, 2¹²⁶]) and gives `sqrt` the precision of `1.0 / inversesqrt()`; NVIDIA's
//! drivers compute a quotient through a reciprocal (the "correctly rounded divide and square root" requests of
//! KhronosGroup/Vulkan-Docs#2814 and microsoft/hlsl-specs#926 exist because no API promises them). lavapipe
//! rounds both correctly. A kernel whose test holds it to a plain-Rust reference's bits through a division (an
//! LBM cell's 1/ρ, a Smagorinsky √), or two kernels that should agree but divide differently, then passes on
//! lavapipe and fails on a card. Under the quirk the quotient is `a · (1/b)`, up to 1.5 ULP from the correctly
//! rounded one, and the root `1/(1/√x)` (the formula Vulkan states), on any adapter. f64 is left correctly
//! rounded: NVIDIA computes its quotient in full precision (and Vulkan states no looser bound it uses).
//!
//! How: as the fused-multiply-add quirk does, the quotient's (or root's) expression becomes, in place, the result
//! of a call (so nothing is renumbered), to a function made once a type (put before every other function). A
//! vector divided by its scalar, or a scalar by a vector, keeps its operands' types.

use std::collections::HashMap;

use naga::{
    BinaryOperator, Expression, Function, Handle, Literal, MathFunction, Module, Span, Type,
    TypeInner,
};

use crate::rewrite::{
    CallAt, SmallFunction, add_per_key, call_in_place, emitted, float_scalar, float_type,
    per_function,
};

/// What a helper computes, and for which types: a quotient of a dividend and a divisor (the quotient's type is
/// the vector one where one side is a scalar), or a root.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Op {
    Divide {
        dividend: TypeInner,
        divisor: TypeInner,
        result: TypeInner,
    },
    Sqrt(TypeInner),
}

/// A quotient or a root found in a function: the expression, its operands, and what replaces it.
struct Found {
    at: Handle<Expression>,
    operands: Vec<Handle<Expression>>,
    op: Op,
}

/// Makes every f32 and f16 quotient and square root of `module`'s functions and entry points inexact. `info` is
/// the module's validation (the operands' types). Returns how many it changed.
pub(crate) fn divide_inexactly(module: &mut Module, info: &naga::valid::ModuleInfo) -> usize {
    let found = per_function(module, info, |f, i| quotients(f, i, &module.types));
    let total = found.iter().map(Vec::len).sum();
    if total == 0 {
        return 0;
    }
    let mut ops: Vec<Op> = Vec::new();
    for f in found.iter().flatten() {
        if !ops.contains(&f.op) {
            ops.push(f.op.clone());
        }
    }
    let (made, functions) = add_per_key(module, &ops, make_helper);
    for (f, values) in functions.into_iter().zip(found) {
        let mut calls = HashMap::new();
        for v in values {
            let function = made[&v.op];
            f.expressions[v.at] = Expression::CallResult(function);
            calls.insert(
                v.at,
                CallAt {
                    emit_first: None,
                    function,
                    arguments: v.operands,
                },
            );
        }
        call_in_place(&mut f.body, &calls);
    }
    total
}

/// A float type's name in a helper's: its width in bits, and `x4` (its size) for a vector.
fn suffix(ty: &TypeInner) -> String {
    match *ty {
        TypeInner::Vector { size, .. } => format!("{}x{}", width(ty) * 8, size as u8),
        _ => format!("{}", width(ty) * 8),
    }
}

/// A float type's width in bytes.
fn width(ty: &TypeInner) -> u8 {
    float_scalar(ty).width
}

/// The f32 and f16 quotients and square roots `f` emits (a constant one, folded already, is left).
fn quotients(
    f: &Function,
    info: &naga::valid::FunctionInfo,
    types: &naga::UniqueArena<Type>,
) -> Vec<Found> {
    let float = |h| float_type(info, types, h).filter(|t| width(t) < 8);
    let emitted = emitted(f);
    let mut found = Vec::new();
    for (at, e) in f.expressions.iter() {
        if !emitted.contains(&at) {
            continue;
        }
        match *e {
            Expression::Binary {
                op: BinaryOperator::Divide,
                left,
                right,
            } => {
                if let (Some(dividend), Some(divisor), Some(result)) =
                    (float(left), float(right), float(at))
                {
                    found.push(Found {
                        at,
                        operands: vec![left, right],
                        op: Op::Divide {
                            dividend,
                            divisor,
                            result,
                        },
                    });
                }
            }
            Expression::Math {
                fun: MathFunction::Sqrt,
                arg,
                ..
            } => {
                if let Some(t) = float(at) {
                    found.push(Found {
                        at,
                        operands: vec![arg],
                        op: Op::Sqrt(t),
                    });
                }
            }
            _ => {}
        }
    }
    found
}

/// `fn bespoke_div_32(a: A, b: B) -> T { return a * (1.0 / b); }` or
/// `fn bespoke_sqrt_32(x: T) -> T { return 1.0 / inverseSqrt(x); }` (16 for f16), the 1 splat to B's (T's) vector.
fn make_helper(types: &mut naga::UniqueArena<Type>, op: &Op) -> Function {
    let mut ty = |inner: &TypeInner| {
        types.insert(
            Type {
                name: None,
                inner: inner.clone(),
            },
            Span::UNDEFINED,
        )
    };
    let bin = |op, left, right| Expression::Binary { op, left, right };
    // 1 in `t`'s scalar, splat to its vector.
    let one = |f: &mut SmallFunction, t: &TypeInner| {
        let value = f.pre(Expression::Literal(match width(t) {
            2 => Literal::F16(half::f16::ONE),
            _ => Literal::F32(1.0),
        }));
        match *t {
            TypeInner::Vector { size, .. } => f.emit(Expression::Splat { size, value }),
            _ => value,
        }
    };
    match op {
        Op::Divide {
            dividend,
            divisor,
            result,
        } => {
            let name = format!("bespoke_div_{}", suffix(result));
            let (ta, tb, tr) = (ty(dividend), ty(divisor), ty(result));
            let mut f = SmallFunction::new(name, &[("a", ta), ("b", tb)], tr);
            let (a, b) = (f.arg(0), f.arg(1));
            let one = one(&mut f, divisor);
            let reciprocal = f.emit(bin(BinaryOperator::Divide, one, b));
            let q = f.emit(bin(BinaryOperator::Multiply, a, reciprocal));
            f.returning(q)
        }
        Op::Sqrt(t) => {
            let name = format!("bespoke_sqrt_{}", suffix(t));
            let tt = ty(t);
            let mut f = SmallFunction::new(name, &[("x", tt)], tt);
            let x = f.arg(0);
            let one = one(&mut f, t);
            let inverse = f.emit(Expression::Math {
                fun: MathFunction::InverseSqrt,
                arg: x,
                arg1: None,
                arg2: None,
                arg3: None,
            });
            let root = f.emit(bin(BinaryOperator::Divide, one, inverse));
            f.returning(root)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::divide_inexactly;
    use crate::rewrite::validate;
    use naga::valid::Capabilities;

    #[test]
    fn every_f32_and_f16_quotient_and_root_is_replaced_and_the_module_validates_without_a_device() {
        let src = "
enable f16;
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> v: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> i: array<u32>;
@group(0) @binding(3) var<storage, read_write> d: array<f64>;
@group(0) @binding(4) var<storage, read_write> h: array<f16>;
fn helper(a: f32) -> f32 { return 1.0 / a; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let k = g.x;
    x[k] = helper(x[k] / x[k + 1u]) + sqrt(x[k + 2u]);
    v[k] = v[k] / v[k + 1u] + v[k + 2u] / x[k] + sqrt(v[k + 3u]);
    i[k] = i[k] / 3u;
    d[k] = d[k] / d[k + 1u] + sqrt(d[k + 2u]);
    h[k] = h[k] / h[k + 1u];
    let c = 6.0 / 3.0;
    x[k + 5u] = c;
}";
        let caps = Capabilities::FLOAT64 | Capabilities::SHADER_FLOAT16;
        let mut m = naga::front::wgsl::parse_str(src).unwrap();
        let before = m.functions.len();
        let info = validate(&m, caps);
        let n = divide_inexactly(&mut m, &info);
        validate(&m, caps);
        // The helper's 1/a; x/x, vec4/vec4, vec4/f32, f16/f16; sqrt of f32 and vec4. Not the integer
        // quotient, not f64's, not the constant one.
        assert_eq!(n, 7, "{n} replaced");
        let names: Vec<_> = m
            .functions
            .iter()
            .filter_map(|(_, f)| f.name.clone())
            .collect();
        // naga's front end splats the scalar of `v / x`: vec4/vec4's helper serves it.
        assert_eq!(m.functions.len(), before + 5, "{names:?}");
        assert_eq!(names.last().map(String::as_str), Some("helper"));
        for want in [
            "bespoke_div_32",
            "bespoke_div_32x4",
            "bespoke_div_16",
            "bespoke_sqrt_32",
            "bespoke_sqrt_32x4",
        ] {
            assert!(names.iter().any(|n| n == want), "{names:?}");
        }
        // f64's quotient and root are left to the device, and the integer quotient is left alone.
        let main = &m.entry_points[0].function;
        let kept = main
            .expressions
            .iter()
            .filter(|(_, e)| {
                matches!(
                    e,
                    naga::Expression::Binary {
                        op: naga::BinaryOperator::Divide,
                        ..
                    } | naga::Expression::Math {
                        fun: naga::MathFunction::Sqrt,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(kept, 3, "f64 / and sqrt, u32 /");
    }

    #[test]
    fn a_kernel_without_float_quotients_is_left_as_it_was_without_a_device() {
        let src = "
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { x[g.x] = x[g.x] * 2.0 + f32(g.x / 3u); }";
        let mut m = naga::front::wgsl::parse_str(src).unwrap();
        let before = format!("{m:?}");
        let info = validate(&m, Capabilities::empty());
        assert_eq!(divide_inexactly(&mut m, &info), 0);
        assert_eq!(format!("{m:?}"), before);
    }
}
