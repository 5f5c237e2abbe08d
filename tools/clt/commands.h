/* One function per `clt` command; each returns the process exit status. */
#ifndef CLT_TOOL_COMMANDS_H
#define CLT_TOOL_COMMANDS_H

int clt_cmd_devices(int argc, char **argv);

#endif
