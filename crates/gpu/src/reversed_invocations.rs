//! The reversed-invocations quirk ([`Quirks::reversed_invocations`](crate::Quirks)): each compute entry point sees
//! `S − 1 − local_invocation_id` where it asked for `local_invocation_id` (S its workgroup size), the matching
//! `local_invocation_index` and `global_invocation_id`, so a workgroup's invocations run in the opposite order
//! of their ids.
//!
//! A GPU runs a workgroup's invocations in warps or waves at once, in an order the hardware picks, so a kernel
//! that reads workgroup memory another invocation writes needs a barrier between the two. lavapipe runs a
//! workgroup's invocations a SIMD row at a time in id order (switching rows at barriers), so a missing barrier
//! where a higher-numbered invocation reads what a lower-numbered one wrote goes unseen there: the write has
//! always happened. Under the quirk the highest id runs first, on any adapter, and such a read finds what was
//! there before (NaN under the stale-workgroup-memory quirk). A kernel with its barriers gives the same bits:
//! every logical invocation does the same work, only the order of the hardware's rows changes.
//!
//! How: as the reversed-workgroups quirk does (`crate::reversed_workgroups`), every expression that read the
//! built-in becomes the result of a call, at the top of the body, to a one-line function of the raw value and the
//! workgroup size (a constant, or the override that sets it). Applied after that quirk, the two compose: the
//! global id is then reversed both ways.

use naga::{
    BinaryOperator, BuiltIn, Expression, Function, Handle, Literal, Module, Span, Type, VectorSize,
};

use crate::rewrite::{SmallFunction, builtin_arguments, reads_as_calls, u32_types};

/// The built-ins that name an invocation within its workgroup, and the function the quirk calls for each.
const REVERSED: [(BuiltIn, &str, &str); 3] = [
    (
        BuiltIn::LocalInvocationId,
        "local_invocation_id",
        "bespoke_reversed_local_invocation_id",
    ),
    (
        BuiltIn::LocalInvocationIndex,
        "local_invocation_index",
        "bespoke_reversed_local_invocation_index",
    ),
    (
        BuiltIn::GlobalInvocationId,
        "global_invocation_id",
        "bespoke_reversed_global_invocation_id_in_group",
    ),
];

/// Reverses the invocation order within the workgroups of every compute entry point of `module` that reads
/// `local_invocation_id`, `local_invocation_index` or `global_invocation_id`. An entry point that takes one as a
/// struct member, or whose workgroup size is an override expression other than a plain override, is an error
/// naming the entry point, so no kernel runs unreversed under the quirk.
pub(crate) fn reverse_invocations(module: &mut Module) -> Result<(), String> {
    let builtins = REVERSED.map(|(b, wgsl, _)| (b, wgsl));
    // (entry point, argument, which of REVERSED)
    let readers = builtin_arguments(module, &builtins)?;
    if readers.is_empty() {
        return Ok(());
    }
    let (u32_ty, vec3_ty) = u32_types(module);
    let reversers = [
        local_id_reverser(REVERSED[0].2, vec3_ty),
        local_index_reverser(REVERSED[1].2, u32_ty, vec3_ty),
        global_id_reverser(REVERSED[2].2, vec3_ty),
    ]
    .map(|f| module.functions.append(f, Span::UNDEFINED));
    reads_as_calls(module, &readers, &reversers, |_| true, |_, _| Vec::new())
}

fn bin(op: BinaryOperator, left: Handle<Expression>, right: Handle<Expression>) -> Expression {
    Expression::Binary { op, left, right }
}

/// `fn …(l, s: vec3<u32>) -> vec3<u32> { return s - 1 - l; }`
fn local_id_reverser(name: &str, vec3_ty: Handle<Type>) -> Function {
    let mut f = SmallFunction::new(name.into(), &[("l", vec3_ty), ("s", vec3_ty)], vec3_ty);
    let (l, s) = (f.arg(0), f.arg(1));
    let one = f.pre(Expression::Literal(Literal::U32(1)));
    let ones = f.emit(Expression::Splat {
        size: VectorSize::Tri,
        value: one,
    });
    let last = f.emit(bin(BinaryOperator::Subtract, s, ones));
    let result = f.emit(bin(BinaryOperator::Subtract, last, l));
    f.returning(result)
}

/// `fn …(i: u32, s: vec3<u32>) -> u32 { return s.x * s.y * s.z - 1 - i; }`
fn local_index_reverser(name: &str, u32_ty: Handle<Type>, vec3_ty: Handle<Type>) -> Function {
    let mut f = SmallFunction::new(name.into(), &[("i", u32_ty), ("s", vec3_ty)], u32_ty);
    let (i, s) = (f.arg(0), f.arg(1));
    let one = f.pre(Expression::Literal(Literal::U32(1)));
    let [x, y, z] = [0, 1, 2].map(|index| f.emit(Expression::AccessIndex { base: s, index }));
    let xy = f.emit(bin(BinaryOperator::Multiply, x, y));
    let n = f.emit(bin(BinaryOperator::Multiply, xy, z));
    let last = f.emit(bin(BinaryOperator::Subtract, n, one));
    let result = f.emit(bin(BinaryOperator::Subtract, last, i));
    f.returning(result)
}

/// `fn …(g, s: vec3<u32>) -> vec3<u32> { return g / s * s + (s - 1 - g % s); }`: the same workgroup, the
/// reversed invocation in it.
fn global_id_reverser(name: &str, vec3_ty: Handle<Type>) -> Function {
    let mut f = SmallFunction::new(name.into(), &[("g", vec3_ty), ("s", vec3_ty)], vec3_ty);
    let (g, s) = (f.arg(0), f.arg(1));
    let one = f.pre(Expression::Literal(Literal::U32(1)));
    let ones = f.emit(Expression::Splat {
        size: VectorSize::Tri,
        value: one,
    });
    let w = f.emit(bin(BinaryOperator::Divide, g, s));
    let base = f.emit(bin(BinaryOperator::Multiply, w, s));
    let l = f.emit(bin(BinaryOperator::Modulo, g, s));
    let last = f.emit(bin(BinaryOperator::Subtract, s, ones));
    let rl = f.emit(bin(BinaryOperator::Subtract, last, l));
    let result = f.emit(bin(BinaryOperator::Add, base, rl));
    f.returning(result)
}

#[cfg(test)]
mod tests {
    use super::reverse_invocations;
    use naga::valid::Capabilities;

    fn validate(m: &naga::Module) -> naga::valid::ModuleInfo {
        crate::rewrite::validate(m, Capabilities::empty())
    }

    /// Parses `src`, reverses it and validates the result; the module before and after.
    fn reversed(src: &str) -> Result<(naga::Module, naga::Module), String> {
        let before = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
        validate(&before);
        let mut after = before.clone();
        reverse_invocations(&mut after)?;
        validate(&after);
        Ok((before, after))
    }

    fn calls(m: &naga::Module) -> usize {
        m.entry_points[0]
            .function
            .body
            .iter()
            .filter(|s| matches!(s, naga::Statement::Call { .. }))
            .count()
    }

    #[test]
    fn every_invocation_id_is_reversed_and_the_arguments_kept_without_a_device() {
        let src = "
var<workgroup> s: array<f32, 64>;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(8, 4, 2)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(local_invocation_index) i: u32,
        @builtin(global_invocation_id) g: vec3<u32>, @builtin(workgroup_id) w: vec3<u32>) {
    s[i] = f32(l.x + g.y);
    workgroupBarrier();
    out[w.x * 64u + i] = s[63u - i];
}";
        let (before, after) = reversed(src).unwrap();
        let args = |m: &naga::Module| format!("{:?}", m.entry_points[0].function.arguments);
        assert_eq!(args(&after), args(&before), "no argument added");
        assert_eq!(after.functions.len(), before.functions.len() + 3);
        assert_eq!(calls(&after), 3, "one call for each id");
    }

    #[test]
    fn a_workgroup_size_from_an_override_is_read_from_it_without_a_device() {
        // The copy probe's shape: `@workgroup_size(WG)` with WG an override (u32, and an i32 one).
        for ty in ["u32", "i32"] {
            let src = format!(
                "
override WG: {ty} = 64;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) l: u32) {{ out[l] = l; }}"
            );
            let (_, after) = reversed(&src).unwrap();
            assert_eq!(calls(&after), 1, "{ty}");
            let reads_override = after.entry_points[0]
                .function
                .expressions
                .iter()
                .any(|(_, e)| matches!(e, naga::Expression::Override(_)));
            assert!(reads_override, "{ty}: the size is the override's");
        }
        let e = reversed(
            "
override WG: u32 = 64u;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(WG * 2u)
fn doubled(@builtin(local_invocation_index) l: u32) { out[l] = l; }",
        )
        .unwrap_err();
        assert!(e.contains("`doubled`") && e.contains("overrides"), "{e}");
    }

    #[test]
    fn a_kernel_that_reads_no_invocation_id_is_left_as_it_was_without_a_device() {
        let src = "
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) w: vec3<u32>) { out[w.x] = 1u; }";
        let (before, after) = reversed(src).unwrap();
        assert_eq!(format!("{before:?}"), format!("{after:?}"));
    }

    #[test]
    fn an_invocation_id_as_a_struct_member_is_an_error_naming_the_entry_point_without_a_device() {
        let src = "
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
struct In { @builtin(local_invocation_index) l: u32 }
@compute @workgroup_size(8)
fn member(i: In) { out[i.l] = 1u; }";
        let e = reversed(src).unwrap_err();
        assert!(
            e.contains("`member`") && e.contains("local_invocation_index"),
            "{e}"
        );
    }
}
