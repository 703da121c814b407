//! The CSV report: a header line, then one line per row (and CPU).

use std::io::{self, Write};

use super::*;
use crate::model::*;

/// The CSV report: a header line, then one line per flat row (as JSON), or
/// per (timeline line, CPU) with `--timeline`.
pub fn write_csv(report: &Report, w: &mut dyn Write) -> io::Result<()> {
    if let Some(t) = &report.timeline {
        writeln!(w, "session,first_round,last_round,time_s,cpu,samples,lost")?;
        for s in &t.sessions {
            for l in &s.lines {
                for (i, cpu) in t.cpus.iter().enumerate() {
                    writeln!(
                        w,
                        "{},{},{},{:.3},{cpu},{},{}",
                        csv_field(&s.session),
                        l.first_round,
                        l.last_round,
                        l.time_s,
                        l.samples[i],
                        l.lost[i]
                    )?;
                }
            }
        }
        return Ok(());
    }
    if let Some(list) = &report.annotations {
        writeln!(
            w,
            "function,image,file,line,address,instruction,inlined,samples,percent,cpu"
        )?;
        for r in super::annotate::json_rows(report, list) {
            writeln!(w, "{}", r.csv_line())?;
        }
        return Ok(());
    }
    let h = &report.header;
    let samples_head = if h.off_cpu.is_some() {
        "off_cpu_ms"
    } else {
        "samples"
    };
    if let Some(cg) = &report.callgraph {
        writeln!(
            w,
            "function_image,function_symbol,relation,{samples_head},percent,image,symbol"
        )?;
        for e in &cg.entries {
            let (fi, fs) = (csv_field(&e.image), csv_field(&e.symbol));
            let mut line = |rel: &str, n: u64, p: f64, image: &str, symbol: &str| {
                writeln!(
                    w,
                    "{fi},{fs},{rel},{},{p:.4},{},{}",
                    amount(h, n),
                    csv_field(image),
                    csv_field(symbol)
                )
            };
            for a in &e.callers {
                line("caller", a.samples, a.percent, &a.image, &a.symbol)?;
            }
            line("self", e.self_samples, e.self_percent, &e.image, &e.symbol)?;
            line("total", e.total, e.total_percent, &e.image, &e.symbol)?;
            for a in &e.callees {
                line("callee", a.samples, a.percent, &a.image, &a.symbol)?;
            }
        }
        return Ok(());
    }
    let incl_head = match (report.shown.inclusive, h.off_cpu.is_some()) {
        (false, _) => "",
        (true, false) => ",inclusive,inclusive_percent",
        (true, true) => ",inclusive_ms,inclusive_percent",
    };
    writeln!(
        w,
        "{samples_head},percent,cpu,tgid,tid,ns_tgid,ns_tid,comm,cgroup,app,image,symbol,vma,\
         location{incl_head}"
    )?;
    let opt = |v: Option<u32>| v.map_or_else(String::new, |v| v.to_string());
    for (r, cpu) in flat_rows(report) {
        let incl = if report.shown.inclusive {
            format!(
                ",{},{:.4}",
                amount(h, r.inclusive_total()),
                r.inclusive_total_percent()
            )
        } else {
            String::new()
        };
        writeln!(
            w,
            "{},{:.4},{},{},{},{},{},{},{},{},{},{},{},{}{incl}",
            amount(h, r.samples[0]),
            r.percent[0],
            opt(cpu),
            opt(r.tgid()),
            opt(r.tid()),
            opt(r.ns_tgid()),
            opt(r.ns_tid()),
            csv_field(r.comm().unwrap_or("")),
            csv_field(r.cgroup().unwrap_or("")),
            csv_field(r.app().map_or("", |a| a)),
            csv_field(&r.image),
            csv_field(r.symbol.as_deref().unwrap_or("")),
            r.vma
                .filter(|_| report.shown.address)
                .map_or_else(String::new, |v| format!("{v:#x}")),
            csv_field(r.location().unwrap_or("")),
        )?;
    }
    Ok(())
}
