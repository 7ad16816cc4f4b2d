//! The fused-multiply-add quirk ([`Quirks::fuses_multiply_add`](crate::Quirks)): every float `a * b + c`,
//! `c + a * b`, `a * b − c` and `c − a * b` of a kernel is computed rounded once instead of twice, as
//! `fma(a, b, ±c)` or `fma(−a, b, c)`.
//!
//! naga emits a multiply and an add without SPIR-V's `NoContraction`, so a driver may contract the pair into one
//! fused instruction, and GPU compilers do (NVIDIA's among them, subtractions too: its FFMA negates an operand for
//! free); lavapipe does not (measured: of 188 random f32 triples whose fused and unfused results differ, it gave
//! the unfused one 188 times). A test that compares a kernel with a plain-Rust reference bit for bit, or two
//! kernels that a compiler may contract differently, then passes on lavapipe and fails on a card. Under the quirk
//! every such pair is fused, on any adapter: between the plain adapter (none fused) and the quirk (all fused) lie
//! the drivers that fuse some.
//!
//! How: the add's (or subtraction's) expression becomes, in place, the result of a call that computes the pair
//! rounded once (so nothing is renumbered): its `Emit` is split around it and the call put there. The called
//! function (one a type and form, put before every other function) computes in the type twice as wide, f32 in f64
//! and f16 in f32, where the product is exact, and rounds the sum, then narrows it: that second rounding differs
//! from a fused one only where the wide sum falls exactly on a tie of the narrow type. naga's own `fma` cannot
//! serve here: Vulkan lets a driver compute it as a multiply and an add, and lavapipe does. f64 pairs, and every
//! pair on a device without f64, become naga's `fma` (fused where the driver fuses it): an add in place, a
//! subtraction through a function that negates an operand first. The multiply stays, unused where the add was its
//! only reader. Pairs whose three operands have one float type are fused, and a vector times its scalar (either
//! side) added to a vector of that type (the dense GEMM's and the operators' `acc + a * b4`), whose helper splats
//! the scalar where it calls naga's `fma`.

use std::collections::HashMap;

use naga::{
    BinaryOperator, Expression, Function, Handle, MathFunction, Module, ScalarKind, Span, Type,
    TypeInner, UnaryOperator,
};

use crate::rewrite::{
    CallAt, SmallFunction, add_per_key, call_in_place, emitted, float_scalar as scalar, float_type,
    per_function,
};

/// Which of the four pairs: `a * b + c` (either order), `a * b − c`, or `c − a * b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Form {
    Add,
    SubtractAddend,
    SubtractProduct,
}

/// A float multiply-add found in a function: the add (or subtraction), the factors and the addend, their types
/// and the form.
struct Pair {
    add: Handle<Expression>,
    a: Handle<Expression>,
    b: Handle<Expression>,
    c: Handle<Expression>,
    types: Types,
    form: Form,
}

/// The types of a pair's factors and addend: all one, or (a vector times a scalar) one factor the scalar of the
/// other two's vector.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Types([TypeInner; 3]);

impl Types {
    /// The pair's type: the addend's (and the result's).
    fn result(&self) -> &TypeInner {
        &self.0[2]
    }
    /// Whether all three are one type (naga's `fma` takes only those).
    fn alike(&self) -> bool {
        self.0[0] == self.0[2] && self.0[1] == self.0[2]
    }
}

/// How a pair is computed: naga's `fma` in place of an add of one type, or a call of the function made for its
/// types and form, computing wider (`wide`) or through naga's `fma` with an operand negated or a scalar splat.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Helper {
    types: Types,
    form: Form,
    wide: bool,
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
    let helper = |p: &Pair| {
        let wide = wide && scalar(p.types.result()).width < 8;
        (wide || p.form != Form::Add || !p.types.alike()).then(|| Helper {
            types: p.types.clone(),
            form: p.form,
            wide,
        })
    };
    // The helpers the pairs need, each once: placed before every other function, so a helper that calls one
    // calls a function before it, as naga's arenas expect.
    let mut helpers: Vec<Helper> = Vec::new();
    for h in found.iter().flatten().filter_map(helper) {
        if !helpers.contains(&h) {
            helpers.push(h);
        }
    }
    let (made, functions) = add_per_key(module, &helpers, make_helper);
    for (f, pairs) in functions.into_iter().zip(found) {
        let mut calls = HashMap::new();
        for p in pairs {
            match helper(&p).map(|h| made[&h]) {
                Some(function) => {
                    f.expressions[p.add] = Expression::CallResult(function);
                    calls.insert(
                        p.add,
                        CallAt {
                            emit_first: None,
                            function,
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

/// The float multiply-adds of `f` that it emits (a constant one, folded already, is not paired).
fn pairs(
    f: &Function,
    info: &naga::valid::FunctionInfo,
    types: &naga::UniqueArena<Type>,
) -> Vec<Pair> {
    let float = |h| float_type(info, types, h);
    let emitted = emitted(f);
    let product = |h| match f.expressions[h] {
        Expression::Binary {
            op: BinaryOperator::Multiply,
            left: a,
            right: b,
        } => Some((a, b)),
        _ => None,
    };
    let mut found = Vec::new();
    for (add, e) in f.expressions.iter() {
        let Expression::Binary { op, left, right } = *e else {
            continue;
        };
        if !emitted.contains(&add) {
            continue;
        }
        // The multiply on the left first, as a compiler reading left to right would take it.
        let on_left = product(left).map(|(a, b)| (a, b, right));
        let on_right = || product(right).map(|(a, b)| (a, b, left));
        let (form, (a, b, c)) = match op {
            BinaryOperator::Add => match on_left.or_else(on_right) {
                Some(abc) => (Form::Add, abc),
                None => continue,
            },
            BinaryOperator::Subtract => match (on_left, on_right()) {
                (Some(abc), _) => (Form::SubtractAddend, abc),
                (None, Some(abc)) => (Form::SubtractProduct, abc),
                (None, None) => continue,
            },
            _ => continue,
        };
        let (Some(ta), Some(tb), Some(tc)) = (float(a), float(b), float(c)) else {
            continue;
        };
        // One type, or a vector times its scalar (either side) added to that vector.
        let fits = |t: &TypeInner| t == &tc || (t == &TypeInner::Scalar(scalar(&tc)) && ta != tb);
        if fits(&ta) && fits(&tb) {
            found.push(Pair {
                add,
                a,
                b,
                c,
                types: Types([ta, tb, tc]),
                form,
            });
        }
    }
    found
}

/// `fn bespoke_fma_32(a: A, b: B, c: T) -> T` (A and B are T, or one of them T's scalar): wide,
/// `T(W(a) * W(b) ± W(c))` (or `T(W(c) − W(a) * W(b))`), W twice T's width; otherwise `fma(a, b, −c)` (or
/// `fma(−a, b, c)`), a scalar factor splat to T first.
fn make_helper(types: &mut naga::UniqueArena<Type>, h: &Helper) -> Function {
    let [ta, tb, tc] = h
        .types
        .0
        .clone()
        .map(|inner| types.insert(Type { name: None, inner }, Span::UNDEFINED));
    let result = h.types.result();
    let width = scalar(result).width;
    let name = format!(
        "bespoke_{}_{}",
        match h.form {
            Form::Add => "fma",
            Form::SubtractAddend => "fms",
            Form::SubtractProduct => "fnma",
        },
        width * 8
    );
    let mut f = SmallFunction::new(name, &[("a", ta), ("b", tb), ("c", tc)], tc);
    let [a, b, c] = [0, 1, 2].map(|i| f.arg(i));
    let bin = |op, left, right| Expression::Binary { op, left, right };
    let value = if h.wide {
        let [a, b, c] = [a, b, c].map(|h| {
            f.emit(Expression::As {
                expr: h,
                kind: ScalarKind::Float,
                convert: Some(width * 2),
            })
        });
        let product = f.emit(bin(BinaryOperator::Multiply, a, b));
        let sum = f.emit(match h.form {
            Form::Add => bin(BinaryOperator::Add, product, c),
            Form::SubtractAddend => bin(BinaryOperator::Subtract, product, c),
            Form::SubtractProduct => bin(BinaryOperator::Subtract, c, product),
        });
        f.emit(Expression::As {
            expr: sum,
            kind: ScalarKind::Float,
            convert: Some(width),
        })
    } else {
        // naga's fma takes three of one type: a scalar factor splat to the vector.
        let widen = |f: &mut SmallFunction, value, ty: &TypeInner| match (ty, result) {
            (TypeInner::Scalar(_), &TypeInner::Vector { size, .. }) => {
                f.emit(Expression::Splat { size, value })
            }
            _ => value,
        };
        let a = widen(&mut f, a, &h.types.0[0]);
        let b = widen(&mut f, b, &h.types.0[1]);
        let negate = |f: &mut SmallFunction, expr| {
            f.emit(Expression::Unary {
                op: UnaryOperator::Negate,
                expr,
            })
        };
        let (a, c) = match h.form {
            Form::Add => (a, c),
            Form::SubtractAddend => (a, negate(&mut f, c)),
            Form::SubtractProduct => (negate(&mut f, a), c),
        };
        f.emit(Expression::Math {
            fun: MathFunction::Fma,
            arg: a,
            arg1: Some(b),
            arg2: Some(c),
            arg3: None,
        })
    };
    f.returning(value)
}

#[cfg(test)]
mod tests {
    use super::fuse_multiply_adds;
    use crate::rewrite::validate;
    use naga::valid::Capabilities;

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
    v[k + 3u] = v[k] * x[k] + v[k + 2u];            // fused: a vector times a scalar
    v[k + 4u] = v[k + 2u] - x[k] * v[k + 1u];       // fused: the scalar first, subtracted
    v[k + 5u] = x[k] * x[k + 1u] + v[k];            // left: a scalar product added to a vector
    x[k + 4u] = x[k] * x[k + 1u] - x[k + 2u];       // fused: a subtraction
    x[k + 6u] = x[k + 2u] - x[k] * x[k + 1u];       // fused: the product subtracted
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
        // Without f64: naga's fma in place of each add, and a function for each subtraction's form that negates
        // an operand of its fma.
        let before = naga::front::wgsl::parse_str(PAIRS).unwrap();
        let (m, n) = fused(PAIRS, caps, false);
        assert_eq!(
            (n, fmas(&m), calls(&m)),
            (10, 10, 5),
            "six fmas in place, one in the function of each subtraction and of each vector times a scalar; \
             the helper's call and those four"
        );
        assert_eq!(m.functions.len(), before.functions.len() + 4);
        // With it: f32 and f16 through a function each type and form that computes them wider; f64 as naga's fma.
        let (m, n) = fused(PAIRS, caps, true);
        assert_eq!((n, fmas(&m), calls(&m)), (10, 1, 10));
        // f32 (three forms), vec4<f32>, f16 and the two vector-times-scalar forms (the added functions come
        // first, then the helper that calls one).
        assert_eq!(m.functions.len(), before.functions.len() + 7);
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
fn main(@builtin(global_invocation_id) g: vec3<u32>) { x[g.x] = x[g.x] * 2.0 / 3.0 - f32(g.x * 3u + 1u); }";
        let before = naga::front::wgsl::parse_str(src).unwrap();
        let (after, n) = fused(src, Capabilities::empty(), true);
        assert_eq!(n, 0);
        assert_eq!(format!("{before:?}"), format!("{after:?}"));
    }
}
