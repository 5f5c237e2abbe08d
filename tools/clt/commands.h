/* One function per `clt` command; each takes its own argv (argv[0] is the
 * command's name) and returns the process exit status: 0 on success, 1 when
 * the work failed, 2 for a usage error. */
#ifndef CLT_TOOL_COMMANDS_H
#define CLT_TOOL_COMMANDS_H

int clt_cmd_devices(int argc, char **argv);
int clt_cmd_smi(int argc, char **argv);
int clt_cmd_train(int argc, char **argv);
int clt_cmd_eval(int argc, char **argv);
int clt_cmd_predict(int argc, char **argv);
int clt_cmd_timeline(int argc, char **argv);
int clt_cmd_tune(int argc, char **argv);
int clt_cmd_warmup(int argc, char **argv);

#endif
