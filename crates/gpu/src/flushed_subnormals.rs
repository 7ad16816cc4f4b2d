//! The flushed-subnormals quirk ([`Quirks::flushes_subnormals`](crate::Quirks)): every float a kernel loads,
//! converts or computes is flushed to a zero of its sign where it is subnormal.
//!
//! WGSL lets an implementation flush subnormals on the input and output of any floating-point operation, and
//! Vulkan leaves it to the driver where a module asks nothing (naga asks nothing): GPUs flush (NVIDIA's Vulkan
//! driver flushed f16 subnormals in a multiply-add, llvm/offload-test-suite#563), lavapipe does not (measured: a
//! product of 10⁻²⁰ and 10⁻²⁰, 10⁻⁴⁰ + 0 and 10⁻⁴⁰ · 2 all kept their subnormal results). A kernel or test that
//! counts on a subnormal then passes on lavapipe and fails on a card. Under the quirk it fails on any adapter.
//!
//! How: each float-typed (scalar or vector) load, conversion, arithmetic result (`+ − · / %`) and built-in
//! function's result moves to an expression of its own, and its old handle becomes the result of a call, in its
//! place, to a function that flushes it (one a type, put before every other function): so every value the kernel
//! goes on to use is flushed, inputs included, and nothing is renumbered. Bit casts are left alone (they move
//! bits, not values), and so are negation and plain copies, which produce no new subnormal.

use std::collections::HashMap;

use naga::{
    BinaryOperator, Expression, Function, Handle, Literal, MathFunction, Module, Span, Type,
    TypeInner,
};

use crate::rewrite::{
    CallAt, SmallFunction, add_per_key, call_in_place, emitted, float_type, per_function,
};

/// Flushes every subnormal float value of `module`'s functions and entry points. `info` is the module's
/// validation (the expressions' types). Returns how many expressions it flushes.
pub(crate) fn flush_subnormals(module: &mut Module, info: &naga::valid::ModuleInfo) -> usize {
    let found = per_function(module, info, |f, i| flushed(f, i, &module.types));
    let total = found.iter().map(Vec::len).sum();
    if total == 0 {
        return 0;
    }
    let mut kinds: Vec<TypeInner> = Vec::new();
    for (_, ty) in found.iter().flatten() {
        if !kinds.contains(ty) {
            kinds.push(ty.clone());
        }
    }
    let (flushers, functions) = add_per_key(module, &kinds, flusher);
    for (f, values) in functions.into_iter().zip(found) {
        let mut calls = HashMap::new();
        for (h, ty) in values {
            let function = flushers[&ty];
            let value = std::mem::replace(&mut f.expressions[h], Expression::CallResult(function));
            let moved = f.expressions.append(value, Span::UNDEFINED);
            calls.insert(
                h,
                CallAt {
                    emit_first: Some(moved),
                    function,
                    arguments: vec![moved],
                },
            );
        }
        call_in_place(&mut f.body, &calls);
    }
    total
}

/// The emitted float-typed values of `f` that the quirk flushes, with their types.
fn flushed(
    f: &Function,
    info: &naga::valid::FunctionInfo,
    types: &naga::UniqueArena<Type>,
) -> Vec<(Handle<Expression>, TypeInner)> {
    let emitted = emitted(f);
    f.expressions
        .iter()
        .filter(|(h, e)| {
            emitted.contains(h)
                && match **e {
                    Expression::Load { .. } | Expression::Math { .. } => true,
                    Expression::As { convert, .. } => convert.is_some(),
                    Expression::Binary { op, .. } => matches!(
                        op,
                        BinaryOperator::Add
                            | BinaryOperator::Subtract
                            | BinaryOperator::Multiply
                            | BinaryOperator::Divide
                            | BinaryOperator::Modulo
                    ),
                    _ => false,
                }
        })
        .filter_map(|(h, _)| float_type(info, types, h).map(|t| (h, t)))
        .collect()
}

/// `fn bespoke_flush(v: T) -> T { return select(v, select(+0, −0, bitcast<i32>(f32(v)) < 0), abs(v) < T(least
/// normal)); }`: a zero stays a zero of its sign, a subnormal becomes one. Written to give that on a device that
/// flushes subnormals itself, as NVIDIA's does (its comparisons and conversions read a subnormal as a zero of its
/// sign): the magnitude test `abs(v) < least` holds for a subnormal either way, and the sign comes from the bits of
/// `v` as an f32 (a conversion keeps the sign of what it flushes or rounds to zero), never from `v < 0` or `v != 0`.
/// An earlier `abs(v) < least & v != 0`, kept a zero by the second test, returned a subnormal unflushed on the
/// H200 (2026-12-04), where `v != 0` read it as zero.
fn flusher(types: &mut naga::UniqueArena<Type>, ty: &TypeInner) -> Function {
    let t = types.insert(
        Type {
            name: None,
            inner: ty.clone(),
        },
        Span::UNDEFINED,
    );
    let (scalar, size) = match *ty {
        TypeInner::Scalar(s) => (s, None),
        TypeInner::Vector { size, scalar } => (scalar, Some(size)),
        _ => unreachable!("only float scalars and vectors are flushed"),
    };
    let (least, zero, negative_zero) = match scalar.width {
        2 => (
            Literal::F16(half::f16::MIN_POSITIVE),
            Literal::F16(half::f16::ZERO),
            Literal::F16(half::f16::NEG_ZERO),
        ),
        4 => (
            Literal::F32(f32::MIN_POSITIVE),
            Literal::F32(0.0),
            Literal::F32(-0.0),
        ),
        _ => (
            Literal::F64(f64::MIN_POSITIVE),
            Literal::F64(0.0),
            Literal::F64(-0.0),
        ),
    };
    let mut f = SmallFunction::new(
        format!("bespoke_flush_{}", scalar.width * 8),
        &[("v", t)],
        t,
    );
    let v = f.arg(0);
    let [least, zero, negative_zero, int_zero] =
        [least, zero, negative_zero, Literal::I32(0)].map(|l| {
            let value = f.pre(Expression::Literal(l));
            match size {
                Some(size) => f.emit(Expression::Splat { size, value }),
                None => value,
            }
        });
    let bin = |op, left, right| Expression::Binary { op, left, right };
    let magnitude = f.emit(Expression::Math {
        fun: MathFunction::Abs,
        arg: v,
        arg1: None,
        arg2: None,
        arg3: None,
    });
    // Subnormal or a zero: below the least normal.
    let small = f.emit(bin(BinaryOperator::Less, magnitude, least));
    // The sign from the bits of v as an f32 (v itself where it is one).
    let single = if scalar.width == 4 {
        v
    } else {
        f.emit(Expression::As {
            expr: v,
            kind: naga::ScalarKind::Float,
            convert: Some(4),
        })
    };
    let bits = f.emit(Expression::As {
        expr: single,
        kind: naga::ScalarKind::Sint,
        convert: None,
    });
    let negative = f.emit(bin(BinaryOperator::Less, bits, int_zero));
    // The zero of v's sign, from constants: `v * 0` would do, but a compiler that ignores zeros' signs folds it.
    let signed_zero = f.emit(Expression::Select {
        condition: negative,
        accept: negative_zero,
        reject: zero,
    });
    let result = f.emit(Expression::Select {
        condition: small,
        accept: signed_zero,
        reject: v,
    });
    f.returning(result)
}

#[cfg(test)]
mod tests {
    use super::flush_subnormals;
    use crate::rewrite::validate;
    use naga::valid::Capabilities;

    #[test]
    fn every_float_value_is_flushed_and_the_module_validates_without_a_device() {
        let src = "
enable f16;
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> v: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> i: array<u32>;
@group(0) @binding(3) var<storage, read_write> d: array<f64>;
@group(0) @binding(4) var<storage, read_write> h: array<f16>;
fn helper(a: f32) -> f32 { return a * 0.5; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let k = g.x;
    x[k] = helper(x[k] * x[k + 1u] + exp(x[k + 2u]));
    v[k] = v[k] / v[k + 1u] - v[k + 2u];
    i[k] = i[k] * 3u + bitcast<u32>(x[k]);
    d[k] = d[k] * d[k + 1u];
    h[k] = f16(x[k]) + h[k + 1u];
    var s = x[k];
    for (var j = 0u; j < k; j++) {
        if j % 2u == 0u { s = s * x[j]; }
    }
    x[k + 5u] = s;
}";
        let caps = Capabilities::FLOAT64 | Capabilities::SHADER_FLOAT16;
        let mut m = naga::front::wgsl::parse_str(src).unwrap();
        let before = m.functions.len();
        let info = validate(&m, caps);
        let n = flush_subnormals(&mut m, &info);
        validate(&m, caps);
        // f32, vec4<f32>, f64 and f16 flushers, before the helper.
        assert_eq!(m.functions.len(), before + 4);
        assert_eq!(
            m.functions.iter().last().unwrap().1.name.as_deref(),
            Some("helper")
        );
        assert!(n >= 25, "{n} values flushed");
    }

    #[test]
    fn a_kernel_without_float_values_is_left_as_it_was_without_a_device() {
        let src = "
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { x[g.x] = x[g.x] * 2u + bitcast<u32>(f32(g.x)); }";
        let mut m = naga::front::wgsl::parse_str(src).unwrap();
        let before = format!("{m:?}");
        let info = validate(&m, Capabilities::empty());
        // `f32(g.x)` converts to a float: the one value it flushes.
        assert_eq!(flush_subnormals(&mut m, &info), 1);
        validate(&m, Capabilities::empty());
        let mut plain =
            naga::front::wgsl::parse_str(src.replace("f32(g.x)", "0.5f").as_str()).unwrap();
        let info = validate(&plain, Capabilities::empty());
        let untouched = format!("{plain:?}");
        assert_eq!(flush_subnormals(&mut plain, &info), 0);
        assert_eq!(format!("{plain:?}"), untouched);
        assert_ne!(format!("{m:?}"), before);
    }
}
