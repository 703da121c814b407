//! The report's choices as values: profile specs (`cpu:0,1 tgid:N tid:N
//! image:GLOB image-exclude:GLOB`), `--separate`, `--sort`, and the image
//! glob. Each parser names the bad value and what is allowed, so a command
//! line front end can print the message as it is.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The spec tags [`ProfileSpec::parse`] accepts.
pub const SPEC_TAGS: &str = "cpu, tgid, tid, image, image-exclude, cgroup";

/// What `--separate` splits (OProfile's `--separate`), decided at report
/// time: the session always keeps CPU, process, thread and binary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Separate {
    /// One `samples %` column pair per CPU.
    pub cpu: bool,
    /// Rows split by tgid/tid, with the command name.
    pub thread: bool,
    /// Library samples attributed to the application that ran them.
    pub lib: bool,
    /// Kernel and module samples attributed to the application that ran
    /// them (implies `lib`, as in OProfile).
    pub kernel: bool,
    /// Rows split by the cgroup (v2) the samples were taken in, with its
    /// path (sessions recorded with cgroups).
    pub cgroup: bool,
}

impl Separate {
    /// The values `--separate` accepts.
    pub const ALLOWED: &'static str = "a comma list of none, cpu, thread, lib, kernel, cgroup, all";

    /// Parses `cpu,thread`, `all`, `none`, … (a comma list).
    pub fn parse(s: &str) -> Result<Separate> {
        let mut sep = Separate::default();
        for word in s.split(',').map(str::trim) {
            match word {
                "none" => {}
                "cpu" => sep.cpu = true,
                "thread" => sep.thread = true,
                "cgroup" => sep.cgroup = true,
                "lib" | "library" => sep.lib = true,
                "kernel" => {
                    sep.kernel = true;
                    sep.lib = true;
                }
                "all" => {
                    sep = Separate {
                        cpu: true,
                        thread: true,
                        lib: true,
                        kernel: true,
                        cgroup: sep.cgroup,
                    }
                }
                _ => {
                    return Err(Error::BadValue {
                        option: "--separate",
                        value: word.to_owned(),
                        allowed: Self::ALLOWED.to_owned(),
                    })
                }
            }
        }
        Ok(sep)
    }

    /// True when samples are attributed to applications (lib or kernel).
    pub fn by_app(&self) -> bool {
        self.lib || self.kernel
    }
}

impl FromStr for Separate {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Separate::parse(s)
    }
}

/// Row order (`--sort`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortKey {
    /// Most samples first (the default).
    #[default]
    Samples,
    /// By symbol name.
    Symbol,
    /// By image name.
    Image,
    /// By symbol address.
    Vma,
}

impl SortKey {
    /// The values `--sort` accepts.
    pub const ALLOWED: &'static str = "one of samples, symbol, image, vma";
}

impl FromStr for SortKey {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "samples" | "sample" => SortKey::Samples,
            "symbol" | "symbols" => SortKey::Symbol,
            "image" => SortKey::Image,
            "vma" => SortKey::Vma,
            _ => {
                return Err(Error::BadValue {
                    option: "--sort",
                    value: s.to_owned(),
                    allowed: Self::ALLOWED.to_owned(),
                })
            }
        })
    }
}

/// An fnmatch-style glob: `*` (any run of characters, `/` included), `?`
/// (one character), `[abc]`, `[a-z]`, `[!abc]` and `\` to quote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob {
    text: String,
    pattern: Vec<Tok>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Char(char),
    Any,
    Star,
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

impl Glob {
    /// Compiles a glob; an unclosed `[` is an error naming the glob.
    pub fn new(text: &str) -> Result<Glob> {
        let mut pattern = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '*' => {
                    if pattern.last() != Some(&Tok::Star) {
                        pattern.push(Tok::Star);
                    }
                }
                '?' => pattern.push(Tok::Any),
                '\\' => pattern.push(Tok::Char(chars.next().unwrap_or('\\'))),
                '[' => {
                    let negated = matches!(chars.peek(), Some('!' | '^'));
                    if negated {
                        chars.next();
                    }
                    let mut items = Vec::new();
                    let mut first = true;
                    loop {
                        let Some(c) = chars.next() else {
                            return Err(Error::BadSpec {
                                spec: text.to_owned(),
                                reason:
                                    "unclosed '[' in the glob (write \\[ for a literal bracket)"
                                        .to_owned(),
                            });
                        };
                        if c == ']' && !first {
                            break;
                        }
                        first = false;
                        let lo = if c == '\\' {
                            chars.next().unwrap_or('\\')
                        } else {
                            c
                        };
                        let mut hi = lo;
                        if chars.peek() == Some(&'-') {
                            let mut ahead = chars.clone();
                            ahead.next();
                            if let Some(&h) = ahead.peek() {
                                if h != ']' {
                                    chars.next();
                                    hi = chars.next().unwrap_or(lo);
                                }
                            }
                        }
                        items.push((lo, hi));
                    }
                    pattern.push(Tok::Class { negated, items });
                }
                c => pattern.push(Tok::Char(c)),
            }
        }
        Ok(Glob {
            text: text.to_owned(),
            pattern,
        })
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `s` matches the whole glob.
    pub fn matches(&self, s: &str) -> bool {
        let s: Vec<char> = s.chars().collect();
        // Iterative matcher with one backtrack point (the last `*`): linear
        // in practice, never exponential.
        let (mut p, mut i) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while i < s.len() {
            let step = match self.pattern.get(p) {
                Some(Tok::Star) => {
                    star = Some((p, i));
                    p += 1;
                    continue;
                }
                Some(Tok::Char(c)) => *c == s[i],
                Some(Tok::Any) => true,
                Some(Tok::Class { negated, items }) => {
                    items.iter().any(|&(lo, hi)| lo <= s[i] && s[i] <= hi) != *negated
                }
                None => false,
            };
            if step {
                p += 1;
                i += 1;
            } else if let Some((sp, si)) = star {
                p = sp + 1;
                i = si + 1;
                star = Some((sp, si + 1));
            } else {
                return false;
            }
        }
        self.pattern[p..].iter().all(|t| *t == Tok::Star)
    }

    /// Whether an image matches: a glob with a `/` is matched against the
    /// full path, any other against the file name too (so `image:libc*`
    /// finds `/usr/lib/x86_64-linux-gnu/libc.so.6`).
    pub fn matches_image(&self, path: &str) -> bool {
        if self.matches(path) {
            return true;
        }
        !self.text.contains('/') && self.matches(base_name(path))
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The file name of a path (`/usr/bin/ls` → `ls`); bracketed names such as
/// `[kernel.kallsyms]` are their own file name.
pub fn base_name(path: &str) -> &str {
    if path.starts_with('[') {
        return path;
    }
    path.rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(path)
}

/// Which samples a report looks at: OProfile's profile specification.
/// Tags combine with AND; the values of one tag with OR.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileSpec {
    /// `cpu:0,1,4-7`: only these CPUs (empty: all).
    pub cpus: BTreeSet<u32>,
    /// `tgid:N,M`: only these processes.
    pub tgids: BTreeSet<u32>,
    /// `tid:N,M`: only these threads.
    pub tids: BTreeSet<u32>,
    /// `image:GLOB,GLOB`: only these binaries (or their applications' samples,
    /// when separating by application).
    pub images: Vec<Glob>,
    /// `image-exclude:GLOB,GLOB`: not these binaries.
    pub exclude_images: Vec<Glob>,
    /// `cgroup:GLOB`: only samples taken in a cgroup whose path (`/`,
    /// `/system.slice/x.service`) matches.
    pub cgroups: Vec<Glob>,
}

impl ProfileSpec {
    /// Parses positional profile specs; a word without a tag is an image
    /// (OProfile: `opreport /usr/bin/foo` means `image:/usr/bin/foo`).
    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<ProfileSpec> {
        let mut spec = ProfileSpec::default();
        for word in words {
            spec.add(word.as_ref())?;
        }
        Ok(spec)
    }

    /// Adds one spec word.
    pub fn add(&mut self, word: &str) -> Result<()> {
        let bad = |reason: String| Error::BadSpec {
            spec: word.to_owned(),
            reason,
        };
        let Some((tag, value)) = word.split_once(':') else {
            if word.is_empty() {
                return Err(bad(format!("empty spec; allowed tags are {SPEC_TAGS}")));
            }
            self.images.push(Glob::new(word)?);
            return Ok(());
        };
        if value.is_empty() {
            return Err(bad(format!("tag '{tag}' needs a value")));
        }
        match tag {
            "cpu" => self.cpus.extend(parse_id_list(value).map_err(bad)?),
            "tgid" | "pid" => self.tgids.extend(parse_id_list(value).map_err(bad)?),
            "tid" => self.tids.extend(parse_id_list(value).map_err(bad)?),
            "image" => {
                for g in value.split(',') {
                    self.images.push(Glob::new(g)?);
                }
            }
            "cgroup" => {
                for g in value.split(',') {
                    self.cgroups.push(Glob::new(g)?);
                }
            }
            "image-exclude" => {
                for g in value.split(',') {
                    self.exclude_images.push(Glob::new(g)?);
                }
            }
            _ => {
                return Err(bad(format!(
                    "unknown tag '{tag}'; allowed tags are {SPEC_TAGS}"
                )))
            }
        }
        Ok(())
    }

    /// True when no tag restricts anything.
    pub fn is_empty(&self) -> bool {
        *self == ProfileSpec::default()
    }

    /// Whether a sample's cgroup path passes the `cgroup:` globs.
    pub fn wants_cgroup(&self, path: &str) -> bool {
        self.cgroups.is_empty() || self.cgroups.iter().any(|g| g.matches(path))
    }

    /// Whether a sample's CPU, process and thread pass.
    #[inline]
    pub fn wants_task(&self, cpu: u32, pid: u32, tid: u32) -> bool {
        (self.cpus.is_empty() || self.cpus.contains(&cpu))
            && (self.tgids.is_empty() || self.tgids.contains(&pid))
            && (self.tids.is_empty() || self.tids.contains(&tid))
    }

    /// Whether a binary passes the image tags. `app` is the application the
    /// sample is attributed to, when separating by application: an
    /// `image:` naming the application keeps its libraries too.
    pub fn wants_image(&self, image: &str, app: Option<&str>) -> bool {
        let hit = |g: &Glob| g.matches_image(image) || app.is_some_and(|a| g.matches_image(a));
        (self.images.is_empty() || self.images.iter().any(hit))
            && !self.exclude_images.iter().any(hit)
    }
}

/// `0,1,4-7` → {0, 1, 4, 5, 6, 7}.
fn parse_id_list(value: &str) -> std::result::Result<Vec<u32>, String> {
    profkit_eventlog::parse_id_list(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separate_lists() {
        let s = Separate::parse("cpu,thread").unwrap();
        assert!(s.cpu && s.thread && !s.lib && !s.kernel);
        let s = Separate::parse("kernel").unwrap();
        assert!(s.kernel && s.lib, "kernel implies lib, as in OProfile");
        assert_eq!(
            Separate::parse("all").unwrap(),
            Separate {
                cpu: true,
                thread: true,
                lib: true,
                kernel: true,
                cgroup: false
            }
        );
        assert_eq!(Separate::parse("none").unwrap(), Separate::default());
        let e = Separate::parse("cpu,bogus").unwrap_err().to_string();
        assert!(e.contains("'bogus'") && e.contains("thread"), "{e}");
    }

    #[test]
    fn sort_keys() {
        assert_eq!("vma".parse::<SortKey>().unwrap(), SortKey::Vma);
        let e = "size".parse::<SortKey>().unwrap_err().to_string();
        assert!(e.contains("'size'") && e.contains("samples, symbol"), "{e}");
    }

    #[test]
    fn globs() {
        let g = Glob::new("lib*.so*").unwrap();
        assert!(g.matches("libc.so.6"));
        assert!(!g.matches("ld-linux.so"));
        assert!(g.matches_image("/usr/lib/libc.so.6"));
        let g = Glob::new("/usr/*").unwrap();
        assert!(g.matches_image("/usr/lib/libc.so.6"));
        assert!(!g.matches_image("/tmp/usr/x"));
        assert!(Glob::new("a?c").unwrap().matches("abc"));
        assert!(Glob::new("[a-c]x").unwrap().matches("bx"));
        assert!(!Glob::new("[!a-c]x").unwrap().matches("bx"));
        assert!(Glob::new("\\[kernel*")
            .unwrap()
            .matches("[kernel.kallsyms]"));
        assert!(Glob::new("*a*a*a*a*b").unwrap().matches("aaaaaaaaab"));
        assert!(!Glob::new("*a*a*a*a*b").unwrap().matches(&"a".repeat(200)));
        assert!(Glob::new("[oops").is_err());
        assert!(Glob::new("").unwrap().matches(""));
        assert!(Glob::new("*").unwrap().matches(""));
    }

    #[test]
    fn specs() {
        let s = ProfileSpec::parse(&["cpu:0,2-3", "tgid:10", "tid:11,12", "image:spin"]).unwrap();
        assert_eq!(s.cpus, [0, 2, 3].into());
        assert_eq!(s.tgids, [10].into());
        assert_eq!(s.tids, [11, 12].into());
        assert!(s.wants_task(2, 10, 12));
        assert!(!s.wants_task(1, 10, 12));
        assert!(s.wants_image("/tmp/spin", None));
        assert!(!s.wants_image("/usr/lib/libc.so.6", None));
        assert!(s.wants_image("/usr/lib/libc.so.6", Some("/tmp/spin")));
        let s = ProfileSpec::parse(&["image-exclude:*kallsyms*"]).unwrap();
        assert!(!s.wants_image("[kernel.kallsyms]", None));
        assert!(s.wants_image("/bin/ls", None));
        let s = ProfileSpec::parse(&["/bin/ls"]).unwrap();
        assert!(s.wants_image("/bin/ls", None));
    }

    #[test]
    fn bad_specs_name_the_value_and_the_allowed_tags() {
        let e = ProfileSpec::parse(&["event:cycles"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'event:cycles'") && e.contains(SPEC_TAGS), "{e}");
        let e = ProfileSpec::parse(&["cpu:x"]).unwrap_err().to_string();
        assert!(e.contains("'x' is not a number"), "{e}");
        let e = ProfileSpec::parse(&["tid:"]).unwrap_err().to_string();
        assert!(e.contains("needs a value"), "{e}");
        assert!(ProfileSpec::parse(&["cpu:3-1"]).is_err());
    }
}
