//! The pack-toward-zero quirk ([`Quirks::packs_toward_zero`](crate::Quirks)): every `pack2x16float(v)` of a
//! kernel rounds each component toward zero instead of to the nearest f16.
//!
//! WGSL leaves a conversion to a narrower float free to give either neighbour of a value between two (and the
//! f32 → f16 conversions of `pack2x16float` with it), and SPIR-V's `PackHalf2x16` states no rounding. AMD's
//! GPUs have an instruction that packs two f32s toward zero (`v_cvt_pkrtz_f16_f32`), and Mesa tells its AMD
//! and NVIDIA compilers (RADV's, NAK) that they may use such a pack (`has_pack_half_2x16_rtz`); lavapipe rounds
//! to nearest, ties to even (measured: `Gpu::rounds_f16_to_nearest_even`, and bespoke-lbm's `step` test prints a
//! device's rounding). A kernel that stores f16 values through `pack2x16float` and a test or a host path that
//! expects them rounded to nearest (an f16 lattice's populations against the `half` crate's conversion, a value
//! kept beside its stored copy) then passes on lavapipe and differs on such a card; and every stored value drifts
//! toward zero. Under the quirk every pack rounds toward zero, on any adapter.
//!
//! How: as the other rewriting quirks do, the pack's expression becomes, in place, the result of a call of one
//! helper (put before every other function): `h = pack2x16float(v)`, then each half whose value came back larger
//! in magnitude than its component (rounded away from zero; an overflow to ∞ included) is stepped one f16 down
//! in magnitude (its bits minus one: f16 is sign and magnitude). NaN and ±∞ stay; on an adapter whose own pack
//! rounds toward zero already nothing changes.

use std::collections::HashMap;

use naga::{
    BinaryOperator, Expression, Function, Handle, Literal, MathFunction, Module, Span, Type,
    TypeInner, VectorSize,
};

use crate::rewrite::{CallAt, SmallFunction, add_per_key, call_in_place, emitted};

/// Makes every `pack2x16float` of `module`'s functions and entry points round toward zero. Returns how many it
/// changed. It needs no validation (the packs are found by their function), so it may follow quirks that have
/// added functions since the module was validated.
pub(crate) fn pack_toward_zero(module: &mut Module) -> usize {
    // In `add_per_key`'s order: the functions, then the entry points.
    let found: Vec<_> = module
        .functions
        .iter()
        .map(|(_, f)| packs(f))
        .chain(module.entry_points.iter().map(|ep| packs(&ep.function)))
        .collect();
    let total = found.iter().map(Vec::len).sum();
    if total == 0 {
        return 0;
    }
    let (made, functions) = add_per_key(module, &[()], |types, ()| make_helper(types));
    let helper = made[&()];
    for (f, values) in functions.into_iter().zip(found) {
        let mut calls = HashMap::new();
        for (at, arg) in values {
            f.expressions[at] = Expression::CallResult(helper);
            calls.insert(
                at,
                CallAt {
                    emit_first: None,
                    function: helper,
                    arguments: vec![arg],
                },
            );
        }
        call_in_place(&mut f.body, &calls);
    }
    total
}

/// The packs `f` emits and their arguments (a constant one, folded already, is left).
fn packs(f: &Function) -> Vec<(Handle<Expression>, Handle<Expression>)> {
    let emitted = emitted(f);
    f.expressions
        .iter()
        .filter(|(at, _)| emitted.contains(at))
        .filter_map(|(at, e)| match *e {
            Expression::Math {
                fun: MathFunction::Pack2x16float,
                arg,
                ..
            } => Some((at, arg)),
            _ => None,
        })
        .collect()
}

/// `fn bespoke_pack2x16float_rtz(v: vec2<f32>) -> u32 { let h = pack2x16float(v); let away =
/// abs(unpack2x16float(h)) > abs(v); let d = select(vec2(0u), vec2(1u, 65536u), away); return h - (d.x + d.y); }`
fn make_helper(types: &mut naga::UniqueArena<Type>) -> Function {
    let mut ty = |inner: TypeInner| types.insert(Type { name: None, inner }, Span::UNDEFINED);
    let vec2 = |scalar| TypeInner::Vector {
        size: VectorSize::Bi,
        scalar,
    };
    let (tv, tu, tvu) = (
        ty(vec2(naga::Scalar::F32)),
        ty(TypeInner::Scalar(naga::Scalar::U32)),
        ty(vec2(naga::Scalar::U32)),
    );
    let mut f = SmallFunction::new("bespoke_pack2x16float_rtz".into(), &[("v", tv)], tu);
    let math = |fun, arg| Expression::Math {
        fun,
        arg,
        arg1: None,
        arg2: None,
        arg3: None,
    };
    let v = f.arg(0);
    let h = f.emit(math(MathFunction::Pack2x16float, v));
    let back = f.emit(math(MathFunction::Unpack2x16float, h));
    let back = f.emit(math(MathFunction::Abs, back));
    let wanted = f.emit(math(MathFunction::Abs, v));
    let away = f.emit(Expression::Binary {
        op: BinaryOperator::Greater,
        left: back,
        right: wanted,
    });
    let u = |f: &mut SmallFunction, x: u32| f.pre(Expression::Literal(Literal::U32(x)));
    let (zero, one, high) = (u(&mut f, 0), u(&mut f, 1), u(&mut f, 1 << 16));
    let none = f.emit(Expression::Compose {
        ty: tvu,
        components: vec![zero, zero],
    });
    let steps = f.emit(Expression::Compose {
        ty: tvu,
        components: vec![one, high],
    });
    let d = f.emit(Expression::Select {
        condition: away,
        accept: steps,
        reject: none,
    });
    let (dx, dy) = (
        f.emit(Expression::AccessIndex { base: d, index: 0 }),
        f.emit(Expression::AccessIndex { base: d, index: 1 }),
    );
    let step = f.emit(Expression::Binary {
        op: BinaryOperator::Add,
        left: dx,
        right: dy,
    });
    let out = f.emit(Expression::Binary {
        op: BinaryOperator::Subtract,
        left: h,
        right: step,
    });
    f.returning(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::validate;

    #[test]
    fn every_pack_becomes_a_call_and_the_module_stays_valid() {
        let src = "
@group(0) @binding(0) var<storage, read_write> w: array<u32>;
fn st(v: vec2<f32>) -> u32 { return pack2x16float(v * 2.0); }
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let x = unpack2x16float(w[g.x]);
    w[g.x] = st(x) + pack2x16float(x.yx);
    w[g.x + 1u] = pack2x16float(vec2<f32>(0.5, 0.25));
}";
        let mut m = naga::front::wgsl::parse_str(src).unwrap();
        let caps = naga::valid::Capabilities::all();
        validate(&m, caps);
        // Two emitted packs (in `st` and in `main`); the constant one is folded, or emitted: at least two.
        let n = pack_toward_zero(&mut m);
        assert!(n >= 2, "{n}");
        validate(&m, caps);
        // The helper's own pack is the only one left; every other is its call's result.
        let all: Vec<&Function> = m
            .functions
            .iter()
            .map(|(_, f)| f)
            .chain(m.entry_points.iter().map(|ep| &ep.function))
            .collect();
        let left: Vec<Option<&str>> = all
            .iter()
            .filter(|f| !packs(f).is_empty())
            .map(|f| f.name.as_deref())
            .collect();
        assert_eq!(left, [Some("bespoke_pack2x16float_rtz")]);
        assert_eq!(packs(all[0]).len(), 1);
        let calls: usize = all
            .iter()
            .map(|f| {
                f.expressions
                    .iter()
                    .filter(|(_, e)| matches!(e, Expression::CallResult(_)))
                    .count()
            })
            .sum();
        assert!(calls >= n, "{calls} calls for {n} packs");
    }
}
