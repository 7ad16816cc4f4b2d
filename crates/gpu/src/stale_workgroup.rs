//! The stale-workgroup-memory quirk ([`Quirks::stale_workgroup_memory`](crate::Quirks)): every workgroup variable
//! a compute entry point uses is filled with poison as each workgroup starts, so a kernel that reads workgroup
//! memory it did not write reads NaN (or 0xDEADBEEF) on any adapter.
//!
//! Vulkan leaves workgroup memory undefined at a workgroup's start unless it is zero-initialised, and bespoke asks
//! wgpu not to zero it (`zero_initialize_workgroup_memory: false`, which saves a GPU a pass over it per
//! workgroup). On a GPU a workgroup then finds what an earlier workgroup or kernel left on its multiprocessor; on
//! lavapipe it finds what the same thread's last workgroup left, often zeros that hide the read. The transform
//! works on the validated naga module, so it applies to every kernel of every crate alike, and the module is
//! validated again after it.
//!
//! The prologue, before the entry point's own body: each invocation stores poison into elements `lid`, `lid + T`,
//! `lid + 2T` … of each workgroup array (T the workgroup's invocations; 1 where the size is an override, so the
//! stores overlap but cover every element), every element of nested arrays, and a workgroup barrier after it.

use naga::{
    AddressSpace, ArraySize, Barrier, BinaryOperator, Block, Expression, Handle, Literal,
    LocalVariable, Module, Scalar, ScalarKind, ShaderStage, Span, Statement, Type, TypeInner,
};

use crate::rewrite::Prologue;

/// The bits of the poison that floats take (a quiet NaN, then converted to the float's width).
const NAN_BITS: u32 = 0x7fc0_dead;
/// The poison of integers and atomics.
const INT_POISON: u32 = 0xdead_beef;

/// Adds the poison prologue to every compute entry point of `module` that uses workgroup memory. `info` is the
/// module's validation (which globals each entry point uses, its callees' included). Errors name a workgroup
/// variable whose type the prologue cannot fill (a struct, a matrix, an array sized by an override), so a kernel
/// is never run unpoisoned under the quirk.
pub(crate) fn poison_workgroup_memory(
    module: &mut Module,
    info: &naga::valid::ModuleInfo,
) -> Result<(), String> {
    let u32_ty = module.types.insert(
        Type {
            name: None,
            inner: TypeInner::Scalar(Scalar::U32),
        },
        Span::UNDEFINED,
    );
    let workgroup: Vec<_> = module
        .global_variables
        .iter()
        .filter(|(_, g)| g.space == AddressSpace::WorkGroup)
        .map(|(h, g)| (h, g.ty, g.name.clone().unwrap_or_default()))
        .collect();
    for (index, ep) in module.entry_points.iter_mut().enumerate() {
        if ep.stage != ShaderStage::Compute {
            continue;
        }
        let uses = info.get_entry_point(index);
        let used: Vec<_> = workgroup
            .iter()
            .filter(|(h, _, _)| !uses[*h].is_empty())
            .collect();
        if used.is_empty() {
            continue;
        }
        let stride = match ep.workgroup_size_overrides {
            Some(_) => 1,
            None => ep.workgroup_size.iter().product::<u32>().max(1),
        };
        let mut p = Prologue::new(&mut ep.function, &module.types, u32_ty);
        let lid = p.local_invocation_index();
        for &&(g, ty, ref name) in &used {
            let base = p.pre(Expression::GlobalVariable(g));
            p.fill(base, ty, Some((lid, stride)))
                .map_err(|what| format!("workgroup variable `{name}`: {what}"))?;
        }
        p.body.push(
            Statement::ControlBarrier(Barrier::WORK_GROUP),
            Span::UNDEFINED,
        );
        p.prepend();
    }
    Ok(())
}

impl Prologue<'_> {
    /// The poison of a scalar type, emitted into the prologue.
    fn scalar_poison(&mut self, s: Scalar) -> Result<Handle<Expression>, String> {
        Ok(match (s.kind, s.width) {
            (ScalarKind::Uint, 4) => self.u32(INT_POISON),
            (ScalarKind::Sint, 4) => self.pre(Expression::Literal(Literal::I32(INT_POISON as i32))),
            (ScalarKind::Float, w) => {
                let bits = self.u32(NAN_BITS);
                let nan = self.emit(Expression::As {
                    expr: bits,
                    kind: ScalarKind::Float,
                    convert: None,
                });
                match w {
                    4 => nan,
                    _ => self.emit(Expression::As {
                        expr: nan,
                        kind: ScalarKind::Float,
                        convert: Some(w),
                    }),
                }
            }
            (ScalarKind::Bool, _) => self.pre(Expression::Literal(Literal::Bool(true))),
            (kind, width) => return Err(format!("no poison for {kind:?} of {width} bytes")),
        })
    }

    /// The poison of a value of type `ty` (a scalar, vector or atomic), emitted into the prologue.
    fn value_poison(&mut self, ty: Handle<Type>) -> Result<Handle<Expression>, String> {
        match self.types[ty].inner {
            TypeInner::Scalar(s) | TypeInner::Atomic(s) => self.scalar_poison(s),
            TypeInner::Vector { size, scalar } => {
                let v = self.scalar_poison(scalar)?;
                Ok(self.emit(Expression::Splat { size, value: v }))
            }
            ref other => Err(format!("cannot poison a {other:?}")),
        }
    }

    /// Stores poison through `ptr` (a pointer to a `ty`). `split`: (the invocation's index, the stride) where the
    /// workgroup's invocations share the outermost array's elements.
    fn fill(
        &mut self,
        ptr: Handle<Expression>,
        ty: Handle<Type>,
        split: Option<(Handle<Expression>, u32)>,
    ) -> Result<(), String> {
        match self.types[ty].inner {
            TypeInner::Array { base, size, .. } => {
                let n = match size {
                    ArraySize::Constant(n) => n.get(),
                    _ => return Err("an array whose size is not a constant".into()),
                };
                let (start, step) = match split {
                    Some((lid, stride)) => (lid, stride),
                    None => (self.u32(0), 1),
                };
                self.array_loop(ptr, base, n, start, step)
            }
            _ => {
                let v = self.value_poison(ty)?;
                let only_first = split.map(|(lid, _)| lid);
                let store = Statement::Store {
                    pointer: ptr,
                    value: v,
                };
                match only_first {
                    // One invocation stores a lone value (the others would race for it).
                    Some(lid) => {
                        let zero = self.u32(0);
                        let first = self.emit(Expression::Binary {
                            op: BinaryOperator::Equal,
                            left: lid,
                            right: zero,
                        });
                        self.body.push(
                            Statement::If {
                                condition: first,
                                accept: Block::from_vec(vec![store]),
                                reject: Block::new(),
                            },
                            Span::UNDEFINED,
                        );
                    }
                    None => self.body.push(store, Span::UNDEFINED),
                }
                Ok(())
            }
        }
    }

    /// `for (var i = start; i < n; i += step) { *ptr[i] = poison }`, nested arrays filled whole in the body.
    fn array_loop(
        &mut self,
        ptr: Handle<Expression>,
        elem: Handle<Type>,
        n: u32,
        start: Handle<Expression>,
        step: u32,
    ) -> Result<(), String> {
        let var = self.f.local_variables.append(
            LocalVariable {
                name: None,
                ty: self.u32_ty,
                init: None,
            },
            Span::UNDEFINED,
        );
        let i_ptr = self.pre(Expression::LocalVariable(var));
        self.body.push(
            Statement::Store {
                pointer: i_ptr,
                value: start,
            },
            Span::UNDEFINED,
        );
        let (n_lit, step_lit) = (self.u32(n), self.u32(step));
        // The loop's body and continuing block are built as prologues of their own over the same function.
        let outer = std::mem::take(&mut self.body);
        let i = self.emit(Expression::Load { pointer: i_ptr });
        let done = self.emit(Expression::Binary {
            op: BinaryOperator::GreaterEqual,
            left: i,
            right: n_lit,
        });
        self.body.push(
            Statement::If {
                condition: done,
                accept: Block::from_vec(vec![Statement::Break]),
                reject: Block::new(),
            },
            Span::UNDEFINED,
        );
        let at = self.emit(Expression::Access {
            base: ptr,
            index: i,
        });
        self.fill(at, elem, None)?;
        let body = std::mem::replace(&mut self.body, Block::new());
        let i2 = self.emit(Expression::Load { pointer: i_ptr });
        let next = self.emit(Expression::Binary {
            op: BinaryOperator::Add,
            left: i2,
            right: step_lit,
        });
        self.body.push(
            Statement::Store {
                pointer: i_ptr,
                value: next,
            },
            Span::UNDEFINED,
        );
        let continuing = std::mem::replace(&mut self.body, outer);
        self.body.push(
            Statement::Loop {
                body,
                continuing,
                break_if: None,
            },
            Span::UNDEFINED,
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::poison_workgroup_memory;
    use crate::rewrite::validate;
    use naga::valid::Capabilities;

    /// Parses `src`, adds the prologue and validates the result; the module before and after.
    fn poisoned(src: &str, caps: Capabilities) -> Result<(naga::Module, naga::Module), String> {
        let before = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
        let info = validate(&before, caps);
        let mut after = before.clone();
        poison_workgroup_memory(&mut after, &info)?;
        validate(&after, caps);
        Ok((before, after))
    }

    fn barriers(block: &naga::Block) -> usize {
        block
            .iter()
            .filter(|s| matches!(s, naga::Statement::ControlBarrier(_)))
            .count()
    }

    #[test]
    fn every_workgroup_type_the_kernels_use_is_poisoned_and_validates_without_a_device() {
        // f32, vectors, u32, i32, atomics, nested arrays, a lone scalar, a helper function's variable, and
        // local_invocation_index taken from the argument list.
        let src = "
var<workgroup> a: array<f32, 100>;
var<workgroup> b: array<vec4<f32>, 33>;
var<workgroup> c: array<u32, 7>;
var<workgroup> d: array<atomic<u32>, 3>;
var<workgroup> e: array<array<i32, 5>, 4>;
var<workgroup> f: f32;
var<workgroup> h: array<f32, 8>;
var<workgroup> unused: array<f32, 8>;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
fn helper(i: u32) -> f32 { return h[i % 8u]; }
@compute @workgroup_size(8, 4)
fn main(@builtin(local_invocation_index) lid: u32) {
    out[lid] = a[lid] + b[lid].x + f32(c[lid % 7u]) + f32(atomicLoad(&d[0])) + f32(e[1][2]) + f + helper(lid);
}";
        let (before, after) = poisoned(src, Capabilities::empty()).unwrap();
        let (f0, f1) = (
            &before.entry_points[0].function,
            &after.entry_points[0].function,
        );
        assert_eq!(
            f0.arguments.len(),
            f1.arguments.len(),
            "lid was an argument"
        );
        // One loop per used array (the nested one has an inner loop inside its outer one), the lone scalar
        // stored under `if lid == 0`, then one barrier before the kernel's own body.
        let loops = f1
            .body
            .iter()
            .filter(|s| matches!(s, naga::Statement::Loop { .. }))
            .count();
        assert_eq!(loops, 6, "a, b, c, d, e and h: not `unused`");
        assert_eq!(barriers(&f1.body), 1);
        assert_eq!(
            f1.body.len() - f0.body.len(),
            after_len(&f1.body),
            "the prologue comes first"
        );
        assert!(f1.local_variables.len() >= f0.local_variables.len() + 7);
    }

    /// Statements before the barrier, plus the barrier.
    fn after_len(block: &naga::Block) -> usize {
        block
            .iter()
            .position(|s| matches!(s, naga::Statement::ControlBarrier(_)))
            .unwrap()
            + 1
    }

    #[test]
    fn f16_and_f64_are_poisoned_through_a_conversion_without_a_device() {
        let src = "
enable f16;
var<workgroup> a: array<f16, 64>;
var<workgroup> b: array<vec2<f64>, 16>;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    out[lid] = f32(a[lid]) + f32(b[lid % 16u].y);
}";
        poisoned(src, Capabilities::SHADER_FLOAT16 | Capabilities::FLOAT64).unwrap();
    }

    #[test]
    fn an_entry_point_without_the_invocation_index_gets_one_without_a_device() {
        let src = "
var<workgroup> s: array<f32, 256>;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) l: vec3<u32>) {
    s[l.x] = f32(l.x);
    workgroupBarrier();
    out[l.x] = s[255u - l.x];
}";
        let (before, after) = poisoned(src, Capabilities::empty()).unwrap();
        let args = &after.entry_points[0].function.arguments;
        assert_eq!(
            args.len(),
            before.entry_points[0].function.arguments.len() + 1
        );
        assert_eq!(
            args.last().unwrap().binding,
            Some(naga::Binding::BuiltIn(naga::BuiltIn::LocalInvocationIndex))
        );
        assert_eq!(barriers(&after.entry_points[0].function.body), 2);
    }

    #[test]
    fn a_kernel_without_workgroup_memory_is_left_as_it_was_without_a_device() {
        let src = "
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { out[g.x] = 1.0; }";
        let (before, after) = poisoned(src, Capabilities::empty()).unwrap();
        assert_eq!(
            format!("{:?}", before.entry_points),
            format!("{:?}", after.entry_points)
        );
    }

    #[test]
    fn a_type_it_cannot_fill_is_an_error_naming_the_variable_without_a_device() {
        let src = "
struct S { x: f32, y: u32 }
var<workgroup> pairs: array<S, 4>;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(4)
fn main(@builtin(local_invocation_index) lid: u32) { out[lid] = pairs[lid].x; }";
        let e = poisoned(src, Capabilities::empty()).unwrap_err();
        assert!(e.contains("`pairs`"), "{e}");
    }
}
