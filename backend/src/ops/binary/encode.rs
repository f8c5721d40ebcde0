//! Binds and dispatches what a [`BinaryPlan`] says.
//!
//! Bytes touched: the kernel reads a's and b's elements and writes dst's, each at
//! start + Σ i_k·nb_k (units) for i_k within the tensor's extents (b's through i_k mod b_ne_k),
//! all inside the tensor's binding, whose span `DeviceTensor::binding` covers; `binary::binary`
//! checked the starts and strides are whole units.

use crate::error::{BackendError, Result};
use crate::exec::{BufferRange, Stream};
use crate::kernel::Access;
use crate::memory::{Binding, DeviceTensor};
use crate::ops::Env;
use crate::ops::SinglePlan;
use crate::ops::elementwise::units;
use crate::ops::row_plan::word;
use crate::params::BinaryUniforms;

use super::plan::{BinaryPlan, WG_SIZE};

pub(crate) fn encode(
    env: &Env,
    stream: &mut Stream,
    plan: &BinaryPlan,
    [a, b, dst]: [&DeviceTensor; 3],
    [ab, bb, db]: [Binding; 3],
) -> Result<()> {
    let p = &plan.problem;
    let name = p.op.name();
    let width = plan.width as usize;
    let unit_of = |t: &DeviceTensor, bind: &Binding| {
        units(t, bind, width)
            .ok_or_else(|| BackendError::InvalidOperands(format!("{name}: a tensor's layout changed under its plan")))
    };
    let (ua, ub, ud) = (unit_of(a, &ab)?, unit_of(b, &bb)?, unit_of(dst, &db)?);
    let ne = p.ne;
    let bne = p.b_ne;
    let params = BinaryUniforms {
        a_start: ua.start,
        b_start: ub.start,
        dst_start: ud.start,
        count: plan.units,
        row_stride: plan.workgroups[0] * WG_SIZE,
        ne0: word(name, "ne0", ne[0] / width)?,
        ne1: word(name, "ne1", ne[1])?,
        ne2: word(name, "ne2", ne[2])?,
        ne3: word(name, "ne3", ne[3])?,
        a_nb0: ua.nb[0],
        a_nb1: ua.nb[1],
        a_nb2: ua.nb[2],
        a_nb3: ua.nb[3],
        b_ne0: word(name, "b ne0", bne[0] / width)?,
        b_ne1: word(name, "b ne1", bne[1])?,
        b_ne2: word(name, "b ne2", bne[2])?,
        b_ne3: word(name, "b ne3", bne[3])?,
        b_nb0: ub.nb[0],
        b_nb1: ub.nb[1],
        b_nb2: ub.nb[2],
        b_nb3: ub.nb[3],
        dst_nb0: ud.nb[0],
        dst_nb1: ud.nb[1],
        dst_nb2: ud.nb[2],
        dst_nb3: ud.nb[3],
    };
    let variant = || crate::variants::binary_variant(plan);
    if p.in_place {
        let kernel = env.plan_kernel(SinglePlan::Binary(*plan), &[Access::Read, Access::ReadWrite], variant)?;
        stream.dispatch(
            &kernel,
            &[BufferRange::new(b.buffer(), bb), BufferRange::new(dst.buffer(), db)],
            &params,
            plan.workgroups,
        )
    } else {
        let kernel = env.plan_kernel(
            SinglePlan::Binary(*plan),
            &[Access::Read, Access::Read, Access::ReadWrite],
            variant,
        )?;
        stream.dispatch(
            &kernel,
            &[
                BufferRange::new(a.buffer(), ab),
                BufferRange::new(b.buffer(), bb),
                BufferRange::new(dst.buffer(), db),
            ],
            &params,
            plan.workgroups,
        )
    }
}
