package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// The scripts ask etcdlead itself for completions (the hidden command
// __complete, given the words so far and the one being typed), so they
// follow the flags of each version. Two answers are no words but requests
// to the shell: ":files" (a flag that takes a file) and ":commands" (the
// command after `run --`). They are not urfave/cli's: its completion offers
// no flag's values, its bash and zsh scripts run the typed line itself
// (after "--", the command), and App.ToFishCompletion is a fixed list.
// bash splits words at '=' (COMP_WORDBREAKS), so the script splits the
// line itself and, for --flag=value, completes the part after the '=',
// which is what bash replaces.
const bashCompletion = `_etcdlead_complete() {
  local line="${COMP_LINE:0:COMP_POINT}" cur opts
  local -a words
  read -ra words <<< "$line"
  [[ "$line" == *" " ]] && words+=("")
  cur="${words[-1]}"
  opts=$(etcdlead __complete "${words[@]:1}" 2>/dev/null)
  COMPREPLY=()
  case "$opts" in
    :files) COMPREPLY=($(compgen -f -- "$cur")) ;;
    :commands) COMPREPLY=($(compgen -c -- "$cur")) ;;
    *)
      if [[ "$cur" == --*=* ]]; then
        local o values=()
        for o in $opts; do values+=("${o#*=}"); done
        opts="${values[*]}"
        cur="${cur#*=}"
      fi
      COMPREPLY=($(compgen -W "$opts" -- "$cur")) ;;
  esac
}
complete -o bashdefault -o default -F _etcdlead_complete etcdlead
`

// zsh runs the file it finds in fpath as the body of _etcdlead on the first
// TAB (compinit autoloads it by its #compdef line): that body defines the
// real _etcdlead and must then complete with it, or the first TAB of each
// shell finds no match. Sourced instead, the script registers itself.
const zshCompletion = `#compdef etcdlead
_etcdlead() {
  local -a opts
  opts=("${(@f)$(etcdlead __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  case "${opts[1]}" in
    :files) _files ;;
    :commands) _command_names ;;
    "") _files ;;
    *) compadd -a opts ;;
  esac
}
if [[ "${zsh_eval_context[-1]}" == loadautofunc ]]; then
  _etcdlead "$@"
else
  compdef _etcdlead etcdlead
fi
`

const fishCompletion = `function __etcdlead_complete
    set -l words (commandline -opc)
    set -e words[1]
    set -l out (etcdlead __complete $words (commandline -ct) 2>/dev/null)
    switch "$out"
        case :files
            __fish_complete_path (commandline -ct)
        case :commands
            __fish_complete_command
        case '*'
            printf '%s\n' $out
    end
end
complete -c etcdlead -f -a '(__etcdlead_complete)'
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:               "completion",
		Usage:              "print a shell completion script for bash, zsh or fish",
		ArgsUsage:          "bash|zsh|fish",
		CustomHelpTemplate: commandHelp(completionExamples, ""),
		Action: func(c *cli.Context) error {
			switch c.Args().First() {
			case "bash":
				_, _ = io.WriteString(c.App.Writer, bashCompletion)
			case "zsh":
				_, _ = io.WriteString(c.App.Writer, zshCompletion)
			case "fish":
				_, _ = io.WriteString(c.App.Writer, fishCompletion)
			default:
				return failf("completion needs bash, zsh or fish, got %q", c.Args().First())
			}
			return nil
		},
	}
}

const completionExamples = `  source <(etcdlead completion bash)
  etcdlead completion zsh > "${fpath[1]}/_etcdlead"
  etcdlead completion fish > ~/.config/fish/completions/etcdlead.fish
`

// completeCommand answers the scripts: the words after "etcdlead", the
// last one being typed.
func completeCommand() *cli.Command {
	return &cli.Command{
		Name:            "__complete",
		Hidden:          true,
		HideHelp:        true,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			for _, w := range complete(c.App, c.Args().Slice()) {
				fmt.Fprintln(c.App.Writer, w)
			}
			return nil
		},
	}
}

// complete returns the completions of the last of words.
func complete(app *cli.App, words []string) []string {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	var cmd *cli.Command
	flags := app.Flags
	for i := 0; i < len(before); i++ {
		w := before[i]
		switch {
		case w == "--" && cmd != nil && cmd.Name == "run":
			if i == len(before)-1 {
				return []string{":commands"}
			}
			return []string{":files"}
		case strings.HasPrefix(w, "-"):
			if f := findFlag(flags, w); f != nil && takesValue(f) && !strings.Contains(w, "=") {
				i++ // its value
			}
		case cmd == nil:
			cmd = findCommand(app, w)
			if cmd == nil {
				return nil
			}
			flags = cmd.Flags
		}
	}
	if n := len(before); n > 0 && strings.HasPrefix(before[n-1], "--") && !strings.Contains(before[n-1], "=") {
		if f := findFlag(flags, before[n-1]); f != nil && takesValue(f) {
			return flagValues(f, "", cur)
		}
	}
	if name, val, ok := strings.Cut(cur, "="); ok && strings.HasPrefix(name, "--") {
		if f := findFlag(flags, name); f != nil {
			return flagValues(f, name+"=", val)
		}
		return nil
	}
	if strings.HasPrefix(cur, "-") {
		var out []string
		for _, f := range flags {
			if n := "--" + f.Names()[0]; strings.HasPrefix(n, cur) {
				out = append(out, n)
			}
		}
		return append(out, matching(cur, "--help")...)
	}
	switch {
	case cmd == nil:
		return matching(cur, commandNames(app)...)
	case cmd.Name == "completion":
		return matching(cur, "bash", "zsh", "fish")
	case cmd.Name == "help":
		return matching(cur, commandNames(app)...)
	}
	return nil
}

func matching(prefix string, words ...string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out = append(out, w)
		}
	}
	return out
}

func findCommand(app *cli.App, name string) *cli.Command {
	for _, c := range app.Commands {
		if c.Name == name && !c.Hidden {
			return c
		}
	}
	return nil
}

func findFlag(flags []cli.Flag, word string) cli.Flag {
	name, _, _ := strings.Cut(strings.TrimLeft(word, "-"), "=")
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func takesValue(f cli.Flag) bool {
	_, isBool := plain(f).(*cli.BoolFlag)
	return !isBool
}

// flagValues completes a flag's value: the choices it has, files for a
// flag that takes one, else nothing.
func flagValues(f cli.Flag, prefix, typed string) []string {
	var choices []string
	switch f.Names()[0] {
	case flagRestart:
		choices = []string{"never", "on-failure", "always"}
	case flagContainment:
		choices = []string{"auto", "cgroup", "process-group"}
	case flagLogLevel:
		choices = []string{"trace", "debug", "info", "warn", "error"}
	case flagLogFormat:
		choices = []string{"text", "json"}
	case flagKillSignal:
		choices = []string{"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGKILL"}
	default:
		if sf, ok := plain(f).(*cli.StringFlag); ok && sf.TakesFile && prefix == "" {
			return []string{":files"}
		}
		return nil
	}
	var out []string
	for _, c := range matching(typed, choices...) {
		out = append(out, prefix+c)
	}
	return out
}
