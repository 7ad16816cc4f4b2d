//! What the pipeline layer's quirks (stale workgroup memory, reversed workgroups) share: a prologue of
//! statements built over an entry point's validated naga function and put before its own body.

use naga::{
    Binding, Block, BuiltIn, Expression, Function, FunctionArgument, Handle, Literal, Range, Span,
    Statement, Type, TypeInner,
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
