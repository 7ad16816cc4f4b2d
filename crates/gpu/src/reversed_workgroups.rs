//! The reversed-workgroups quirk ([`Quirks::reversed_workgroups`](crate::Quirks)): each compute entry point sees
//! `num_workgroups − 1 − workgroup_id` where it asked for `workgroup_id` (and the matching
//! `global_invocation_id`), so the workgroups of a dispatch run in the opposite order of their ids.
//!
//! A GPU runs a dispatch's workgroups thousands at a time, in an order Vulkan does not define; lavapipe runs them
//! in id order on a few threads. A kernel whose workgroup reads what a lower-numbered workgroup of the same
//! dispatch writes (a carry, an in-place update across workgroups, a scan without a look-back) then passes on
//! lavapipe and fails on a card. Under the quirk the last workgroup runs first, on any adapter.
//!
//! How: the entry point keeps the built-in as its raw argument (and gains `num_workgroups` where it lacks it), and
//! every expression that read the argument becomes the result of a call, at the top of the body, to a one-line
//! function returning the reversed id. No expression moves, so no handle has to be renumbered. naga 30 does not
//! require uniform control flow at a barrier (`ValidationFlags::CONTROL_FLOW_UNIFORMITY` covers derivatives), so a
//! kernel whose barriers sit in loops bounded by the id validates as before although a call's result is not
//! uniform to naga; a unit test says so should that change.

use naga::{
    BinaryOperator, BuiltIn, Expression, Function, Handle, Literal, Module, Span, Type, VectorSize,
};

use crate::rewrite::{SmallFunction, builtin_arguments, reads_as_calls, u32_types};

/// The built-ins that name a workgroup, and what the quirk hands the kernel for each.
const REVERSED: [(BuiltIn, &str, &str); 2] = [
    (
        BuiltIn::WorkGroupId,
        "workgroup_id",
        "bespoke_reversed_workgroup_id",
    ),
    (
        BuiltIn::GlobalInvocationId,
        "global_invocation_id",
        "bespoke_reversed_global_invocation_id",
    ),
];

/// Reverses the workgroup order of every compute entry point of `module` that reads `workgroup_id` or
/// `global_invocation_id` (`local_invocation_*` stay as they are). An entry point that takes either as a struct
/// member, or `global_invocation_id` with a workgroup size computed from overrides (one set by an override is read
/// from it), is an error naming the entry point, so no kernel runs unreversed under the quirk.
pub(crate) fn reverse_workgroups(module: &mut Module) -> Result<(), String> {
    let builtins = REVERSED.map(|(b, wgsl, _)| (b, wgsl));
    // (entry point, argument, which of REVERSED)
    let readers = builtin_arguments(module, &builtins)?;
    if readers.is_empty() {
        return Ok(());
    }
    let (_, vec3_ty) = u32_types(module);
    let reversers = REVERSED.map(|(builtin, _, name)| {
        let f = reverser(name, builtin == BuiltIn::GlobalInvocationId, vec3_ty);
        module.functions.append(f, Span::UNDEFINED)
    });
    let global = |r: usize| REVERSED[r].0 == BuiltIn::GlobalInvocationId;
    // The dispatch's size in workgroups, read (or added as an argument) once an entry point.
    let mut count = None;
    reads_as_calls(module, &readers, &reversers, global, |p, _| {
        let n = *count.get_or_insert_with(|| {
            p.builtin(BuiltIn::NumWorkGroups, vec3_ty, "bespoke_dispatch_size")
        });
        vec![n]
    })
}

/// `fn bespoke_reversed_workgroup_id(w, n: vec3<u32>) -> vec3<u32> { return n - 1 - w; }`, or with `global`,
/// `fn bespoke_reversed_global_invocation_id(g, n, s: vec3<u32>) -> vec3<u32> { return (n - 1 - g / s) * s + g % s; }`.
fn reverser(name: &str, global: bool, vec3_ty: Handle<Type>) -> Function {
    let names: &[&str] = if global {
        &["g", "n", "s"]
    } else {
        &["w", "n"]
    };
    let args: Vec<_> = names.iter().map(|&n| (n, vec3_ty)).collect();
    let mut f = SmallFunction::new(name.into(), &args, vec3_ty);
    let id = f.arg(0);
    let n = f.arg(1);
    let s = global.then(|| f.arg(2));
    let one = f.pre(Expression::Literal(Literal::U32(1)));
    let ones = f.emit(Expression::Splat {
        size: VectorSize::Tri,
        value: one,
    });
    let bin = |op, left, right| Expression::Binary { op, left, right };
    let last = f.emit(bin(BinaryOperator::Subtract, n, ones));
    let result = match s {
        None => f.emit(bin(BinaryOperator::Subtract, last, id)),
        Some(s) => {
            let w = f.emit(bin(BinaryOperator::Divide, id, s));
            let l = f.emit(bin(BinaryOperator::Modulo, id, s));
            let rw = f.emit(bin(BinaryOperator::Subtract, last, w));
            let base = f.emit(bin(BinaryOperator::Multiply, rw, s));
            f.emit(bin(BinaryOperator::Add, base, l))
        }
    };
    f.returning(result)
}

#[cfg(test)]
mod tests {
    use super::reverse_workgroups;
    use naga::valid::{Capabilities, ValidationFlags, Validator};

    fn validate(m: &naga::Module) -> naga::valid::ModuleInfo {
        Validator::new(ValidationFlags::all(), Capabilities::empty())
            .validate(m)
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    /// Parses `src`, reverses it and validates the result; the module before and after.
    fn reversed(src: &str) -> Result<(naga::Module, naga::Module), String> {
        let before = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
        validate(&before);
        let mut after = before.clone();
        reverse_workgroups(&mut after)?;
        validate(&after);
        Ok((before, after))
    }

    fn args(m: &naga::Module) -> Vec<Option<naga::Binding>> {
        m.entry_points[0]
            .function
            .arguments
            .iter()
            .map(|a| a.binding.clone())
            .collect()
    }

    #[test]
    fn a_barrier_in_a_loop_bounded_by_the_workgroup_id_still_validates_without_a_device() {
        // The dense GEMM's shape: a K loop whose bounds come from the workgroup id, barriers inside it. Should naga
        // come to require uniform control flow at barriers, the reversed id (a call's result) fails here first.
        let src = "
var<workgroup> s: array<f32, 64>;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    var acc = 0.0;
    for (var k = 0u; k < w.x + w.y; k++) {
        s[l] = f32(k);
        workgroupBarrier();
        acc += s[63u - l];
        workgroupBarrier();
    }
    out[w.x * 64u + l] = acc;
}";
        let (before, after) = reversed(src).unwrap();
        let mut want = args(&before);
        want.push(Some(naga::Binding::BuiltIn(naga::BuiltIn::NumWorkGroups)));
        assert_eq!(args(&after), want, "num_workgroups added; the rest kept");
        assert_eq!(after.functions.len(), before.functions.len() + 2);
        let calls = after.entry_points[0]
            .function
            .body
            .iter()
            .take_while(|s| matches!(s, naga::Statement::Call { .. }))
            .count();
        assert_eq!(
            calls, 1,
            "the body starts with the call that gives the reversed id"
        );
    }

    #[test]
    fn num_workgroups_is_reused_where_the_kernel_takes_it_without_a_device() {
        let src = "
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
struct In { @builtin(local_invocation_index) l: u32, @builtin(num_workgroups) n: vec3<u32> }
@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) w: vec3<u32>, i: In) {
    out[w.x * 8u + i.l] = i.n.x;
}";
        let (before, after) = reversed(src).unwrap();
        assert_eq!(args(&after), args(&before));
    }

    #[test]
    fn a_kernel_that_reads_neither_id_is_left_as_it_was_without_a_device() {
        let src = "
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) l: u32) { out[l] = 1.0; }";
        let (before, after) = reversed(src).unwrap();
        assert_eq!(format!("{before:?}"), format!("{after:?}"));
    }

    #[test]
    fn the_global_id_is_reversed_a_workgroup_at_a_time_its_size_read_from_an_override_without_a_device()
     {
        let src = "
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(8, 2)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(workgroup_id) w: vec3<u32>) {
    out[g.x + g.y * 64u] = w.x;
}";
        let (_, after) = reversed(src).unwrap();
        let body = &after.entry_points[0].function.body;
        let calls = body
            .iter()
            .filter(|s| matches!(s, naga::Statement::Call { .. }))
            .count();
        assert_eq!(calls, 2, "one call for each id");
        // A size set by an override is read from it (the copy probe's `@workgroup_size(WG)`); one computed from
        // overrides is refused, naming the entry point.
        let (_, after) = reversed(
            "
override WG: u32 = 64u;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(WG)
fn wide(@builtin(global_invocation_id) g: vec3<u32>) { out[g.x] = 1u; }",
        )
        .unwrap();
        assert!(
            after.entry_points[0]
                .function
                .expressions
                .iter()
                .any(|(_, e)| matches!(e, naga::Expression::Override(_))),
            "the size is the override's"
        );
        let e = reversed(
            "
override WG: u32 = 64u;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(WG * 2u)
fn doubled(@builtin(global_invocation_id) g: vec3<u32>) { out[g.x] = 1u; }",
        )
        .unwrap_err();
        assert!(e.contains("`doubled`") && e.contains("overrides"), "{e}");
    }

    #[test]
    fn the_workgroup_id_as_a_struct_member_is_an_error_naming_the_entry_point_without_a_device() {
        let src = "
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
struct In { @builtin(workgroup_id) w: vec3<u32> }
@compute @workgroup_size(8)
fn carry(i: In) { out[i.w.x] = 1u; }";
        let e = reversed(src).unwrap_err();
        assert!(e.contains("`carry`") && e.contains("workgroup_id"), "{e}");
    }
}
