//! The `condense` command over pi session files.

fn main() {
    eprintln!("condense: not built yet");
    std::process::exit(1);
}
