//! A fleet store's stacks as a report's [`Stacks`]: folded lines, flame
//! graphs and pprof, rendered by the local report's own writers.

use std::collections::HashMap;

use profkit_fleet::{Client, Key, Query};

use super::report::entry_names;
use super::{base_query, fleet_err, from_line, header, selected, FleetOptions};
use crate::model::{
    Column, Function, Location, Mapping, Report, ShownColumns, StackSample, Stacks, Symbol,
};
use crate::ReportOptions;

/// Interns a fleet's stack entries as mappings, functions and locations.
#[derive(Default)]
struct Model {
    stacks: Stacks,
    mappings: HashMap<String, u32>,
    locations: HashMap<String, u32>,
}

impl Model {
    fn location(&mut self, entry: &str) -> u32 {
        if let Some(&l) = self.locations.get(entry) {
            return l;
        }
        let (image, function) = entry_names(entry);
        let st = &mut self.stacks;
        let mapping = *self.mappings.entry(image.to_owned()).or_insert_with(|| {
            st.mappings.push(Mapping {
                path: image.to_owned(),
                name: image.to_owned(),
                build_id: None,
                kernel: image == "[kernel.kallsyms]"
                    || (image.starts_with('[') && image.ends_with(".ko]")),
                base: 0,
            });
            (st.mappings.len() - 1) as u32
        });
        let symbol = match function {
            Some(f) => Symbol::Named(f.to_owned()),
            None if image == crate::UNKNOWN_SYMBOL => Symbol::Unknown,
            None => Symbol::NoSymbols,
        };
        st.functions.push(Function {
            symbol,
            mapping,
            start: None,
            inlined: false,
        });
        st.locations.push(Location {
            mapping,
            offset: 0,
            function: (st.functions.len() - 1) as u32,
            inlined: Vec::new(),
        });
        let l = (st.locations.len() - 1) as u32;
        self.locations.insert(entry.to_owned(), l);
        l
    }
}

/// The report of the fleet store's stacks (the selected samples' distinct
/// (process, stack) pairs, summed by the server) with no rows: what
/// [`crate::write_collapsed`], [`crate::write_flamegraph`] and
/// [`crate::pprof::write_pprof`] take. Frames are named as stored (the function,
/// `[binary]` unnamed); there are no offsets (a location is a function).
///
/// # Errors
/// As [`super::fleet_report`].
pub fn fleet_stacks(
    client: &Client,
    fleet: &FleetOptions,
    opts: &ReportOptions,
) -> crate::Result<Report> {
    let base = base_query(client, fleet, opts)?;
    let (total, totals) = selected(client, &base)?;
    let query = Query {
        group: vec![Key::Process],
        ..base
    };
    let rows = client.stacks(&query).map_err(fleet_err)?;
    let mut m = Model::default();
    let mut samples = Vec::with_capacity(rows.len());
    for r in rows {
        let locations = r.stack.iter().map(|e| m.location(e)).collect();
        samples.push(StackSample {
            column: 0,
            pid: 0,
            tid: 0,
            process: r.keys.into_iter().next().unwrap_or_default(),
            locations,
            count: r.samples,
        });
    }
    m.stacks.samples = samples;
    Ok(Report {
        header: header(total, &totals),
        columns: vec![Column::All],
        shown: ShownColumns {
            symbols: true,
            ..ShownColumns::default()
        },
        rows: Vec::new(),
        rows_below_threshold: 0,
        timeline: None,
        warnings: vec![from_line(client, &totals)],
        unnamed_binaries: Vec::new(),
        callgraph: None,
        stacks: Some(m.stacks),
        annotations: None,
    })
}

/// The fleet's stacks in a stack format, drawn by the local report's own
/// writers: `collapsed` (`process;frame;…;frame N`, outermost frame first),
/// `flamegraph` (inferno) or `pprof` (gzipped protobuf).
///
/// # Errors
/// As [`super::fleet_report`], another format ([`crate::Error::Fleet`]), or
/// writing fails.
pub fn fleet_write_stacks(
    client: &Client,
    fleet: &FleetOptions,
    opts: &ReportOptions,
    format: crate::Format,
    out: &mut dyn std::io::Write,
) -> crate::Result<()> {
    if !format.needs_stacks() {
        return Err(crate::Error::Fleet(format!(
            "{format:?} is not a stack format (collapsed, flamegraph, pprof)"
        )));
    }
    let r = fleet_stacks(client, fleet, opts)?;
    match format {
        crate::Format::Collapsed => crate::export::write_collapsed(&r, None, out),
        crate::Format::Flamegraph => crate::export::write_flamegraph(&r, None, out),
        _ => crate::pprof::write_pprof(&r, out),
    }
    .map_err(crate::Error::Output)
}
