/**
 * Finds promises nobody waits for: a store call whose promise is dropped is a write that may
 * never happen (or happen after the answer) and an error nobody sees. TypeScript reports a
 * promise used as a value, but not one dropped as a statement. Reported:
 *   - an expression statement whose value is a promise (write `await`, or `void` when dropping it is meant);
 *   - an arrow function whose body is a promise where the caller expects nothing back (`forEach`, event handlers);
 *   - a promise tested for truth (`!p`, `p && x`, `p ? a : b`).
 */
import ts from 'typescript';
import { join, relative } from 'node:path';

export interface Finding { file: string; line: number; text: string; why: string }

export function findFloatingPromises(root: string, include: (file: string) => boolean): Finding[] {
  const configPath = join(root, 'tsconfig.json');
  const config = ts.readConfigFile(configPath, ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const program = ts.createProgram({ rootNames: parsed.fileNames, options: { ...parsed.options, noEmit: true } });
  const checker = program.getTypeChecker();
  const findings: Finding[] = [];

  const thenable = (t: ts.Type, node: ts.Node): boolean => {
    const then = t.getProperty('then');
    return !!then && checker.getTypeOfSymbolAtLocation(then, node).getCallSignatures().length > 0;
  };
  /** `some`: a promise may be there (dropping it loses it); `every`: always a promise (so always true). */
  const isPromise = (node: ts.Node, how: 'some' | 'every' = 'some'): boolean => {
    const type = checker.getTypeAtLocation(node);
    const types = type.isUnion() ? type.types : [type];
    return how === 'some' ? types.some((t) => thenable(t, node)) : types.every((t) => thenable(t, node));
  };
  /** `.catch(f)` or `.then(f, g)`: the rejection is handled. */
  const handled = (e: ts.Expression): boolean =>
    ts.isCallExpression(e) &&
    ts.isPropertyAccessExpression(e.expression) &&
    (e.expression.name.text === 'catch' || (e.expression.name.text === 'then' && e.arguments.length >= 2));
  const expectsVoid = (fn: ts.ArrowFunction): boolean => {
    const contextual = checker.getContextualType(fn);
    if (!contextual) return false;
    const sigs = contextual.getCallSignatures();
    return sigs.length > 0 && sigs.every((s) => (checker.getReturnTypeOfSignature(s).flags & (ts.TypeFlags.Void | ts.TypeFlags.Undefined)) !== 0);
  };

  for (const sf of program.getSourceFiles()) {
    if (sf.isDeclarationFile || !include(sf.fileName)) continue;
    const report = (node: ts.Node, why: string) => {
      const { line } = sf.getLineAndCharacterOfPosition(node.getStart(sf));
      findings.push({ file: relative(root, sf.fileName), line: line + 1, text: node.getText(sf).split('\n')[0]!.slice(0, 120), why });
    };
    const visit = (node: ts.Node): void => {
      if (ts.isExpressionStatement(node)) {
        const e = node.expression;
        const assignment =
          ts.isBinaryExpression(e) &&
          [ts.SyntaxKind.EqualsToken, ts.SyntaxKind.QuestionQuestionEqualsToken, ts.SyntaxKind.BarBarEqualsToken, ts.SyntaxKind.AmpersandAmpersandEqualsToken].includes(
            e.operatorToken.kind,
          );
        if (!ts.isVoidExpression(e) && !ts.isAwaitExpression(e) && !assignment && !handled(e) && isPromise(e)) report(node, 'promise dropped');
      } else if (ts.isArrowFunction(node) && !ts.isBlock(node.body)) {
        const body = node.body;
        if (!ts.isVoidExpression(body) && !handled(body) && expectsVoid(node) && isPromise(body)) report(node, 'promise returned where nothing is awaited');
      } else if (ts.isPrefixUnaryExpression(node) && node.operator === ts.SyntaxKind.ExclamationToken) {
        if (isPromise(node.operand, 'every')) report(node, 'promise tested for truth');
      } else if (ts.isBinaryExpression(node) && [ts.SyntaxKind.AmpersandAmpersandToken, ts.SyntaxKind.BarBarToken].includes(node.operatorToken.kind)) {
        if (isPromise(node.left, 'every')) report(node, 'promise tested for truth');
      } else if (ts.isConditionalExpression(node) || ts.isIfStatement(node) || ts.isWhileStatement(node)) {
        const cond = ts.isConditionalExpression(node) ? node.condition : node.expression;
        if (isPromise(cond, 'every')) report(node, 'promise tested for truth');
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return findings;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = join(import.meta.dirname, '..', '..');
  const found = findFloatingPromises(root, (f) => !f.includes('/node_modules/'));
  for (const f of found) console.log(`${f.file}:${f.line}: ${f.why}: ${f.text}`);
  console.log(`${found.length} finding(s)`);
}
