package keeper

import (
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/exitcode"
)

func TestProtocolRoundTrip(t *testing.T) {
	for _, c := range []Command{
		{Op: OpDeadline, Deadline: 123456789 * time.Nanosecond},
		{Op: OpStop, Sig: syscall.SIGINT},
		{Op: OpSignal, Sig: syscall.SIGHUP},
		{Op: OpKill},
		{Op: OpStart, Deadline: 42, Env: []string{"ETCDLEAD_ID=a \"quoted\" id", "ETCDLEAD_REV=7"}},
		{Op: OpStart, Deadline: 42},
	} {
		got, err := parseCommand(c.String())
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("parseCommand(%q) = %+v, %v", c.String(), got, err)
		}
	}
	for _, bad := range []string{"", "deadline", "stop x", "reboot 1"} {
		if _, err := parseCommand(bad); err == nil {
			t.Errorf("parseCommand(%q) accepted", bad)
		}
	}
}

func TestReportRoundTrip(t *testing.T) {
	for _, r := range []Report{
		{Op: OpStarted, Pid: 42},
		{Op: OpStarted, Pid: 42, InCgroup: true},
		{Op: OpPastFence, Late: 1500 * time.Microsecond},
		{Op: OpFailed, Code: exitcode.NotFound, Msg: "exec: \"nope\": executable file not found in $PATH"},
		{Op: OpExit, Code: 3, Reason: ReasonExited},
		{Op: OpExit, Code: 143, Reason: ReasonExited, Signaled: true},
		{Op: OpExit, Code: 137, Reason: ReasonFenced},
	} {
		got, err := ParseReport(r.String())
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("ParseReport(%q) = %+v, %v", r.String(), got, err)
		}
	}
	for _, bad := range []string{"", "started", "started x", "started 1 elsewhere", "exit 1", "exit 1 exited loudly", "keeper 3"} {
		if _, err := ParseReport(bad); err == nil {
			t.Errorf("ParseReport(%q) accepted", bad)
		}
	}
}
