//! Binding and dispatch of a [`NormPlan`].
//!
//! What the kernel may touch: each operand's binding covers its layout's span (rounded out to
//! whole words, or whole vectors on the vector path, within its buffer); the kernel addresses
//! the elements of each layout only (`rms_norm.wgsl`'s header). In place, only dst is bound; with
//! the fused residual ADD, the residual and the sum are bound too.

use super::{NormPlan, OP};
use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream, grid_2d};
use crate::kernel::Access;
use crate::memory::{Binding, DeviceTensor};
use crate::ops::Env;
use crate::ops::SinglePlan;
use crate::ops::row_plan::{Units, units, vector_binding, word};
use crate::params::RmsNormUniforms;

/// An operand's binding, and the same as whole 16-byte vectors where it allows that.
type Bindings = (Binding, Option<Binding>);

/// The operands' bindings, plain and as vectors where they allow it.
pub(super) struct Bound {
    x: Bindings,
    /// The residual and the sum (the fused ADD).
    r: Option<(Bindings, Bindings)>,
    w: Option<Bindings>,
    b: Option<Bindings>,
    dst: Bindings,
}

impl Bound {
    pub(super) fn new(
        env: &Env,
        x: &DeviceTensor,
        residual: Option<(&DeviceTensor, &DeviceTensor)>,
        w: Option<&DeviceTensor>,
        b: Option<&DeviceTensor>,
        dst: &DeviceTensor,
    ) -> Result<Bound> {
        Ok(Bound {
            x: vector_binding(x, env, true)?,
            r: residual
                .map(|(r, s)| Ok::<_, BackendError>((vector_binding(r, env, true)?, vector_binding(s, env, true)?)))
                .transpose()?,
            w: w.map(|t| vector_binding(t, env, true)).transpose()?,
            b: b.map(|t| vector_binding(t, env, true)).transpose()?,
            dst: vector_binding(dst, env, true)?,
        })
    }

    /// Whether every operand may be read as vectors.
    pub(super) fn vec4_allowed(&self) -> bool {
        self.x.1.is_some()
            && self.dst.1.is_some()
            && self.r.is_none_or(|(r, s)| r.1.is_some() && s.1.is_some())
            && self.w.is_none_or(|w| w.1.is_some())
            && self.b.is_none_or(|b| b.1.is_some())
    }
}

fn pick(b: Bindings, vector: bool) -> Result<Binding> {
    match (vector, b.1) {
        (false, _) => Ok(b.0),
        (true, Some(v)) => Ok(v),
        (true, None) => Err(BackendError::InvalidOperands(format!(
            "{OP}: the plan reads vectors an operand's binding does not allow"
        ))),
    }
}

type Placed<'a> = Option<(&'a DeviceTensor, Binding, Units)>;

/// An optional operand with its binding and units.
fn operand<'a>(t: Option<&'a DeviceTensor>, bb: Option<Bindings>, name: &str, v: bool) -> Result<Placed<'a>> {
    match (t, bb) {
        (Some(t), Some(bb)) => {
            let binding = pick(bb, v)?;
            let u = units(OP, name, t.layout(), &binding, v)?;
            Ok(Some((t, binding, u)))
        }
        _ => Ok(None),
    }
}

/// Records the plan's one dispatch.
#[allow(clippy::too_many_arguments)]
pub(super) fn record(
    env: &Env,
    stream: &mut Stream,
    bound: &Bound,
    x: &DeviceTensor,
    residual: Option<(&DeviceTensor, &DeviceTensor)>,
    w: Option<&DeviceTensor>,
    b: Option<&DeviceTensor>,
    dst: &DeviceTensor,
    eps: f32,
    plan: &NormPlan,
) -> Result<()> {
    let rows = &plan.rows;
    if rows.rows == 0 || rows.row_len == 0 {
        return Ok(());
    }
    let v = rows.vec4;
    let (lx, ld) = (x.layout(), dst.layout());
    let bx = pick(bound.x, v)?;
    let bd = pick(bound.dst, v)?;
    let ux = units(OP, "x", lx, &bx, v)?;
    let ud = units(OP, "dst", ld, &bd, v)?;
    let w = operand(w, bound.w, "weight", v)?;
    let b = operand(b, bound.b, "bias", v)?;
    let r = operand(residual.map(|(r, _)| r), bound.r.map(|(r, _)| r), "residual", v)?;
    let s = operand(residual.map(|(_, s)| s), bound.r.map(|(_, s)| s), "sum", v)?;
    let strides = |o: &Placed<'_>| -> [u32; 5] {
        match o {
            Some((_, _, u)) => [u.start, u.nb[0], u.nb[1], u.nb[2], u.nb[3]],
            None => [0; 5],
        }
    };
    let [r_start, r_nb0, r_nb1, r_nb2, r_nb3] = strides(&r);
    let [sum_start, sum_nb0, sum_nb1, sum_nb2, sum_nb3] = strides(&s);
    let per = if v { 4 } else { 1 };
    let ne_of = |t: &DeviceTensor, i: usize| -> Result<u32> {
        let n = t.layout().ne[i];
        word(OP, "an extent", if i == 0 { n / per } else { n })
    };
    let operand_words = |o: &Placed<'_>| -> Result<[u32; 8]> {
        Ok(match o {
            Some((t, _, u)) => [
                u.start,
                ne_of(t, 0)?,
                ne_of(t, 1)?,
                ne_of(t, 2)?,
                ne_of(t, 3)?,
                u.nb[1],
                u.nb[2],
                u.nb[3],
            ],
            None => [0, 1, 1, 1, 1, 0, 0, 0],
        })
    };
    let [w_start, w_ne0, w_ne1, w_ne2, w_ne3, w_nb1, w_nb2, w_nb3] = operand_words(&w)?;
    let [b_start, b_ne0, b_ne1, b_ne2, b_ne3, b_nb1, b_nb2, b_nb3] = operand_words(&b)?;
    let grid = grid_2d(rows.workgroups, env.limits().max_compute_workgroups_per_dimension);
    let params = RmsNormUniforms {
        x_start: if plan.in_place { ud.start } else { ux.start },
        x_nb0: ux.nb[0],
        x_nb1: ux.nb[1],
        x_nb2: ux.nb[2],
        x_nb3: ux.nb[3],
        dst_start: ud.start,
        dst_nb0: ud.nb[0],
        dst_nb1: ud.nb[1],
        dst_nb2: ud.nb[2],
        dst_nb3: ud.nb[3],
        w_start,
        w_ne0,
        w_ne1,
        w_ne2,
        w_ne3,
        w_nb1,
        w_nb2,
        w_nb3,
        b_start,
        b_ne0,
        b_ne1,
        b_ne2,
        b_ne3,
        b_nb1,
        b_nb2,
        b_nb3,
        ne0: word(OP, "a row", lx.ne[0] / per)?,
        n_elements: word(OP, "a row", lx.ne[0])?,
        ne1: word(OP, "ne1", lx.ne[1].max(1))?,
        ne2: word(OP, "ne2", lx.ne[2].max(1))?,
        n_rows: word(OP, "rows", rows.rows)?,
        groups_x: grid[0],
        r_start,
        r_nb0,
        r_nb1,
        r_nb2,
        r_nb3,
        sum_start,
        sum_nb0,
        sum_nb1,
        sum_nb2,
        sum_nb3,
        eps,
    };
    // In the kernel's binding order: x, residual, weight, bias, dst, sum.
    let mut buffers = Vec::with_capacity(6);
    let mut access = Vec::with_capacity(6);
    if !plan.in_place {
        buffers.push(BufferRange::new(x.buffer(), bx));
        access.push(Access::Read);
    }
    for (t, binding, _) in r.iter().chain(w.iter()).chain(b.iter()) {
        buffers.push(BufferRange::new(t.buffer(), *binding));
        access.push(Access::Read);
    }
    buffers.push(BufferRange::new(dst.buffer(), bd));
    access.push(Access::ReadWrite);
    for (t, binding, _) in s.iter() {
        buffers.push(BufferRange::new(t.buffer(), *binding));
        access.push(Access::ReadWrite);
    }
    let kernel = env.plan_kernel(SinglePlan::Norm(*plan), &access, || crate::variants::rms_norm(plan))?;
    stream.dispatch(&kernel, &buffers, &params, grid)
}
